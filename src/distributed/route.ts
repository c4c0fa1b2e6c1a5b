/**
 * Which of a group's communicators serves a call (process_group.ts): the one whose row in
 * backends.ts reaches the memory its tensors are in, and, for a communicator bound to this
 * rank's device (emu.ts), only tensors on that device. Anything else is refused before a
 * pointer is read, saying why.
 * @module
 */

import { canonicalDeviceName, FAMILIES, isFamilyName } from "../tensor/device/mod.ts";
import { invalid } from "./arguments.ts";
import type { Backend } from "./backend.ts";
import { type Connected, entryOf, type Memory } from "./backends.ts";

/** Whether the device named `name` is `device` (a canonical name; a bad name is not). */
function isDevice(name: string | undefined, device: string): boolean {
  try {
    return name !== undefined && canonicalDeviceName(name) === device;
  } catch {
    return false;
  }
}

/**
 * The communicator for a call on tensors in `memory` (from `memoryOf`) on `devices`.
 *
 * @param what The operation, for errors.
 * @param connected The group's communicators.
 * @param memory The memory of the call's tensors, or null for none (a barrier).
 * @param devices Each tensor's device (undefined: host memory).
 * @returns The communicator.
 * @throws DistError "invalid": no communicator reaches the memory (with the reason the group
 *   gave, such as CUDA's absence), or the tensors are on another device than its own.
 */
export function route(
  what: string,
  connected: Connected,
  memory: string | null,
  devices: (string | undefined)[],
): Backend {
  const { name, backends, unreachable } = connected;
  // A call without tensors (a barrier) goes to the first communicator: host memory's, if any.
  if (memory === null) return backends[0];
  const backend = backends.find((b) =>
    (entryOf(b.name).reaches as readonly string[]).includes(memory)
  );
  const device = devices[0] ?? "cpu";
  if (backend === undefined) {
    const reason = unreachable[memory as Memory];
    if (reason) {
      // A family this process cannot use (CUDA absent) is named by its kind of device: "a GPU".
      const unit = isFamilyName(memory) && !FAMILIES[memory].isAvailable()
        ? FAMILIES[memory].unit
        : null;
      const where = unit === null ? device : `${/^[aeiou]/i.test(unit) ? "an" : "a"} ${unit}`;
      throw invalid(`${what}: a tensor is on ${where} but ${reason}`);
    }
    throw invalid(
      `${what}: a tensor is on ${device}, which the ${name} backend cannot reach; move it, or ` +
        `use the "auto" backend`,
    );
  }
  const bound = backend.device;
  const elsewhere = bound === undefined ? undefined : devices.find((d) => !isDevice(d, bound));
  if (elsewhere !== undefined) {
    throw invalid(
      `${what}: a tensor is on ${elsewhere}, but this rank's ${backend.name} communicator is on ` +
        `${bound} (the device of its local rank); move the tensor there`,
    );
  }
  return backend;
}
