// The emulated accelerator keeps a GPU's contract (src/tensor/device/emu.ts): its memory is its
// own and counted per device, within DTRAIN_EMU_MEMORY_BYTES; work is queued and runs later in
// issue order, so a read sees every kernel queued before it and a device error comes at the next
// read, once; devices beyond DTRAIN_EMU_DEVICES are refused; "emu" is "emu:0"; copies between
// devices carry the values and the gradient.
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { canonicalDeviceName, emu, F, getDevice, randn, tensor, zeros } from "../../mod.ts";
import type { EmuDevice } from "../../src/tensor/device/mod.ts";
import { MAX_QUEUED } from "../../src/tensor/device/emu_queue.ts";

const device = (name: string) => getDevice(name) as EmuDevice;

Deno.test("emu memory is not host memory and is counted per device", () => {
  assert.equal(device("emu:0").isHostMemory, false);
  const [a, b] = [device("emu:3"), device("emu:4")];
  const [beforeA, beforeB] = [a.allocatedBytes(), b.allocatedBytes()];
  const t = zeros([1000], { device: "emu:3" });
  assert.equal(a.allocatedBytes(), beforeA + 4000);
  assert.equal(b.allocatedBytes(), beforeB, "another device's count is its own");
  const y = t.add(1); // queued, reading t
  t.dispose();
  assert.equal(a.allocatedBytes(), beforeA + 4000, "the free counts at once (y stays)");
  // The free is ordered after the kernel that reads t, as cudaFreeAsync is.
  assert.deepEqual(new Set(y.toArray()), new Set([1]));
  y.dispose();
  assert.equal(a.allocatedBytes(), beforeA);
});

Deno.test("work is queued, runs in order before a read, and at the end of the task", async () => {
  const queue = device("emu:0").queue;
  emu.synchronize();
  const x = tensor([1, 2, 3], [3], { device: "emu" });
  let y = x;
  for (let i = 0; i < 10; i++) y = y.mul(2);
  assert.ok(queue.pending >= 10, `${queue.pending} pending`);
  // A copy to the host waits for every kernel queued before it: no stale read.
  assert.deepEqual([...y.toArray()], [1024, 2048, 3072]);
  assert.equal(queue.pending, 0);
  x.add(1);
  assert.ok(queue.pending > 0);
  emu.synchronize("emu:0");
  assert.equal(queue.pending, 0);
  x.add(1);
  await new Promise((resolve) => setTimeout(resolve, 0));
  assert.equal(queue.pending, 0, "the queue runs when the task that filled it ends");
  for (let i = 0; i < MAX_QUEUED + 5; i++) x.add(1);
  assert.ok(queue.pending < MAX_QUEUED, "the queue is bounded");
  // Each device has its own queue: a read on emu:0 leaves emu:5's work queued.
  const other = tensor([1], [1], { device: "emu:5" }).add(1);
  x.toArray();
  assert.ok(device("emu:5").queue.pending > 0);
  assert.deepEqual([...other.toArray()], [2]);
});

Deno.test("a device error comes at the next read, once, and later work still runs", () => {
  const w = randn([4, 3]).to("emu:2");
  const bad = F.embedding(tensor([1, 9], [2], { dtype: "i32" }).to("emu:2"), w);
  const after = w.mul(2); // queued after the failing kernel
  const message = "emu:2: embedding: index 9 at position 1 is out of range [0, 4) (found on " +
    "the device, reported at the next read: kernels run asynchronously)";
  // Not on another device's read.
  assert.deepEqual([...tensor([5], [1], { device: "emu:0" }).add(1).toArray()], [6]);
  assert.throws(() => emu.synchronize(2), { message });
  emu.synchronize(2); // reported once
  assert.deepEqual([...after.toArray()], [...w.toArray()].map((v) => 2 * v));
  assert.equal(bad.device, "emu:2");
  for (const read of [() => bad.toArray(), () => bad.sum().item()]) {
    F.embedding(tensor([-1], [1], { dtype: "i32" }).to("emu:2"), w);
    assert.throws(read, { message: /^emu:2: embedding: index -1 at position 0 is out of range/ });
  }
});

Deno.test('"emu" is "emu:0", and names and indices are checked', () => {
  assert.equal(canonicalDeviceName("emu"), "emu:0");
  assert.equal(getDevice("emu"), getDevice("emu:0"));
  assert.equal(zeros([1], { device: "emu" }).device, "emu:0");
  assert.equal(randn([2]).to("emu:0").to("emu").device, "emu:0");
  emu.synchronize("emu");
  const count = emu.deviceCount();
  assert.throws(() => emu.synchronize("cuda:0"), {
    name: "RangeError",
    message: 'emu: "cuda:0" is not an emu device name',
  });
  assert.throws(() => emu.synchronize(count), {
    message: `emu.synchronize: device ${count} does not exist (there are ${count})`,
  });
  assert.throws(() => zeros([1], { device: `emu:${count}` }), {
    name: "RangeError",
    message: `device "emu:${count}" does not exist: there are ${count} emulated devices ` +
      "(DTRAIN_EMU_DEVICES sets how many)",
  });
});

Deno.test("a copy from emu:0 to emu:1 carries the values queued on emu:0 and the gradient", () => {
  const x = randn([3, 5]).to("emu:0").requiresGrad_(true);
  const y = x.mul(3); // queued on emu:0
  const moved = y.to("emu:1");
  assert.equal(moved.device, "emu:1");
  assert.deepEqual([...moved.toArray()], [...y.toArray()]);
  moved.sum().backward();
  assert.equal(x.grad!.device, "emu:0");
  assert.deepEqual(new Set(x.grad!.toArray()), new Set([3]));
});

Deno.test("DTRAIN_EMU_DEVICES values that are not a count from 1 to 1024 are refused", () => {
  const saved = Deno.env.get("DTRAIN_EMU_DEVICES");
  try {
    for (const bad of ["0", "-1", "2.5", "1e3", "1025", "two", " 2"]) {
      Deno.env.set("DTRAIN_EMU_DEVICES", bad);
      assert.throws(() => emu.deviceCount(), {
        name: "RangeError",
        message: `DTRAIN_EMU_DEVICES must be a whole number from 1 to 1024, got "${bad}"`,
      });
    }
    Deno.env.set("DTRAIN_EMU_DEVICES", "");
    assert.equal(emu.deviceCount(), 8, "empty is unset: eight devices");
  } finally {
    if (saved === undefined) Deno.env.delete("DTRAIN_EMU_DEVICES");
    else Deno.env.set("DTRAIN_EMU_DEVICES", saved);
  }
});

/** What tests/tensor/workers/emu_env.ts reports under `env`. */
async function childUnder(env: Record<string, string>): Promise<Record<string, unknown>> {
  const child = fileURLToPath(new URL("./workers/emu_env.ts", import.meta.url));
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "--no-check", child],
    env,
    stdout: "piped",
    stderr: "piped",
  }).output();
  const text = new TextDecoder().decode(out.stdout);
  assert.ok(out.success, new TextDecoder().decode(out.stderr));
  return JSON.parse(text);
}

Deno.test("DTRAIN_EMU_DEVICES and DTRAIN_EMU_MEMORY_BYTES bound the devices and their memory", async () => {
  const seen = await childUnder({ DTRAIN_EMU_DEVICES: "2", DTRAIN_EMU_MEMORY_BYTES: "2048" });
  assert.deepEqual(seen, {
    count: 2,
    last: "emu:1",
    beyond: {
      error: 'device "emu:2" does not exist: there are 2 emulated devices (DTRAIN_EMU_DEVICES ' +
        "sets how many)",
    },
    half: "emu:0",
    full: "emu:0",
    over: {
      error: "emu:0: out of memory allocating 4 bytes (2048 of 2048 in use; " +
        "DTRAIN_EMU_MEMORY_BYTES sets the capacity)",
    },
    afterFree: "emu:0",
  });
  const badCapacity = await childUnder({ DTRAIN_EMU_MEMORY_BYTES: "lots" });
  assert.deepEqual(badCapacity.last, {
    error: 'DTRAIN_EMU_MEMORY_BYTES must be a positive whole number, got "lots"',
  });
});
