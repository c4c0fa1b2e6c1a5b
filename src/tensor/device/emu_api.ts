/**
 * `emu`: the emulated accelerator's counterpart of `torch.cuda` (how many devices, waiting for
 * their queued work, the precision of their products), exported from mod.ts as `emu`. The devices
 * themselves are `"emu:0"` … (emu.ts).
 * @module
 */

import { emuDeviceCount, madeEmuDevice } from "./emu.ts";
import {
  getEmuMatmulPrecision,
  type MatmulPrecisionName,
  setEmuMatmulPrecision,
} from "./emu_precision.ts";

/**
 * Whether tensors can live on `"emu"`: always, unless `DTRAIN_EMU_DEVICES` is malformed
 * ({@linkcode unavailableReason} says so). The same question as `cuda.isAvailable`.
 *
 * @returns True when the emulated devices are usable.
 */
export function isAvailable(): boolean {
  return unavailableReason() === "";
}

/**
 * Why the emulated devices are unavailable (a malformed `DTRAIN_EMU_DEVICES`), or `""`.
 *
 * @returns The reason, in a sentence.
 */
export function unavailableReason(): string {
  try {
    emuDeviceCount();
    return "";
  } catch (err) {
    return (err as Error).message;
  }
}

/**
 * How many emulated devices there are (`DTRAIN_EMU_DEVICES`, default 8).
 *
 * @returns The count.
 * @throws RangeError when `DTRAIN_EMU_DEVICES` is not a whole number from 1 to 1024.
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { emu } from "../../../mod.ts";
 * assert.ok(emu.deviceCount() >= 1);
 * ```
 */
export function deviceCount(): number {
  return emuDeviceCount();
}

/**
 * Waits until the work queued on an emulated device has run, and throws the first error it hit
 * since the last report (an index out of range), as `cuda.synchronize` does.
 *
 * @param device The device, by index or name (default `emu:0`).
 * @throws RangeError for a name that is not an emu device's; the device's error otherwise.
 */
export function synchronize(device: number | string = 0): void {
  let index: number;
  if (typeof device === "number") index = device;
  else {
    const match = /^emu(?::(\d+))?$/.exec(device);
    if (match === null) throw new RangeError(`emu: "${device}" is not an emu device name`);
    index = Number(match[1] ?? 0);
  }
  if (!Number.isInteger(index) || index < 0 || index >= emuDeviceCount()) {
    throw new RangeError(
      `emu.synchronize: device ${device} does not exist (there are ${emuDeviceCount()})`,
    );
  }
  madeEmuDevice(index)?.queue.synchronize();
}

/**
 * Sets the precision of matrix products and attention on every emulated device, as
 * `cuda.setMatmulPrecision` does on the GPUs: `"highest"` (f32), `"high"` (operands rounded to
 * TF32) or `"medium"` (to bf16), with f32 accumulation and results.
 *
 * @param precision The precision.
 * @throws RangeError for another name.
 */
export function setMatmulPrecision(precision: MatmulPrecisionName): void {
  setEmuMatmulPrecision(precision);
}

/**
 * The precision of matrix products on the emulated devices.
 *
 * @returns The precision's name.
 */
export function getMatmulPrecision(): MatmulPrecisionName {
  return getEmuMatmulPrecision();
}
