/**
 * Devices found by name. The families dtrain ships are the records of family.ts (`cpu`; `cuda`,
 * which says why when no GPU is usable; `emu`, the emulated accelerator; a family shipped with
 * dtrain adds its record there); any other registers at run time with
 * `registerDevice(family, factory)`. `"cuda:1"` asks the "cuda" factory for index 1, and `"cuda"`
 * is `"cuda:0"`: each device is made once per family and index, on its first use (so its native
 * library opens then), and cached under every name it was asked by, so the lookup on the
 * allocation path is one map read. A device's own `name` is its canonical name, the one tensors
 * carry and comparisons use.
 * @module
 */

import type { DeviceBackend, DeviceFactory } from "./device.ts";
import { FAMILIES, FAMILY_NAMES } from "./family.ts";

const factories = new Map<string, DeviceFactory>(
  FAMILY_NAMES.map((name) => [name, FAMILIES[name].create]),
);
const devices = new Map<string, DeviceBackend>();
/** The devices made so far, once each (the allocation path sums their bytes without an iterator). */
const made: DeviceBackend[] = [];

/**
 * Registers the device family `family` (a lowercase word: `"cuda"`, `"null"`).
 *
 * @param family The name before the optional `:index`.
 * @param factory Makes the device for an index, on first use.
 * @throws RangeError for a malformed name, or a family registered already.
 */
export function registerDevice(family: string, factory: DeviceFactory): void {
  if (!/^[a-z][a-z0-9_]*$/.test(family)) {
    throw new RangeError(`registerDevice: device name must be a lowercase word, got "${family}"`);
  }
  if (factories.has(family)) {
    throw new RangeError(`registerDevice: device "${family}" is registered already`);
  }
  factories.set(family, factory);
}

/**
 * The device called `name` (`"cpu"`, `"cuda:0"`; a bare family means index 0), made on first use.
 *
 * @param name The device name as tensors carry it.
 * @returns The device.
 * @throws Error naming the device and the registered ones when there is none by that name.
 */
export function getDevice(name: string): DeviceBackend {
  const known = devices.get(name);
  if (known !== undefined) return known;
  const match = /^([a-z][a-z0-9_]*)(?::(\d+))?$/.exec(name);
  const factory = match ? factories.get(match[1]) : undefined;
  if (match === null || factory === undefined) {
    throw new Error(
      `device "${name}" is not available in this build (registered: ${
        [...factories.keys()].join(", ")
      })`,
    );
  }
  const index = Number(match[2] ?? 0);
  const key = `${match[1]}:${index}`;
  const device = devices.get(key) ?? factory(index);
  devices.set(key, device);
  devices.set(name, device);
  if (!made.includes(device)) made.push(device);
  return device;
}

/**
 * The canonical name of a device (`"cuda"` and `"cuda:0"` are `"cuda:0"`; `"cpu"` is `"cpu"`): the
 * name tensors carry, so two names of one device compare equal once made canonical.
 *
 * @param name A device name, as `getDevice` takes it.
 * @returns The device's own name.
 * @throws Error as `getDevice` does for a device that is not available.
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { canonicalDeviceName } from "../../../mod.ts";
 * assert.equal(canonicalDeviceName("cpu"), "cpu");
 * ```
 */
export function canonicalDeviceName(name: string): string {
  return getDevice(name).name;
}

/** Bytes held by every device made so far. */
export function allocatedBytesOnAll(): number {
  let total = 0;
  for (let i = 0; i < made.length; i++) total += made[i].allocatedBytes();
  return total;
}
