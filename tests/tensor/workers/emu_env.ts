// Run by device_test.ts with DTRAIN_EMU_DEVICES and DTRAIN_EMU_MEMORY_BYTES set: prints, as JSON,
// what the emulated devices did under them (each step's result or error message).
import { emu, type Tensor, zeros } from "../../../mod.ts";

/** `fn`'s result, or the message of what it threw. */
function attempt(fn: () => unknown): unknown {
  try {
    return fn();
  } catch (err) {
    return { error: (err as Error).message };
  }
}

const held: Tensor[] = [];
const take = (n: number, device = "emu:0") => {
  const t = zeros([n], { device });
  held.push(t);
  return t.device;
};
console.log(JSON.stringify({
  count: attempt(() => emu.deviceCount()),
  last: attempt(() => take(1, `emu:${emu.deviceCount() - 1}`)),
  beyond: attempt(() => take(1, `emu:${emu.deviceCount()}`)),
  // f32: 4 bytes each; the capacity is per device.
  half: attempt(() => take(256)),
  full: attempt(() => take(256)),
  over: attempt(() => take(1)),
  afterFree: attempt(() => (held[1].dispose(), take(1))),
}));
