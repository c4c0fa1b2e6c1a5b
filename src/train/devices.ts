/**
 * The devices `--device` names: a device family of src/tensor/device/family.ts (`cpu`; `cuda`,
 * GPUs; `emu`, the emulated accelerator), whose record says whether it is usable here and how many
 * devices this machine has. Each process of a node trains on the device of its local rank, as
 * torchrun's convention has it, and a family with memory of its own gets the "auto" process group:
 * its device collectives for the model, host ones for the rest.
 * @module
 */

import type { BackendName } from "../distributed/backend.ts";
import { deviceName, FAMILIES, type FamilyName } from "../tensor/device/mod.ts";
import type { Device } from "../tensor/storage.ts";

/** A `--device` value: a device family, without an index. */
export type TrainDevice = FamilyName;

/**
 * Why the job cannot run on `device` with `nprocPerNode` processes a node, or null when it can.
 *
 * @param choice The `--device` value.
 * @param nprocPerNode Processes per node, one per device of a family with one per process.
 * @returns The message for the user, or null.
 */
export function deviceProblem(choice: TrainDevice, nprocPerNode: number): string | null {
  const { title, unit, single, isAvailable, unavailableReason, deviceCount } = FAMILIES[choice];
  if (!isAvailable()) {
    return `--device ${choice}: ${title} is not available: ${unavailableReason()}`;
  }
  // The processes of a node share a single device (the CPU).
  if (single) return null;
  const count = deviceCount();
  if (nprocPerNode > count) {
    return `--device ${choice} runs one process per ${unit}, but --nproc-per-node is ` +
      `${nprocPerNode} and this machine has ${count} ${unit}${count === 1 ? "" : "s"}`;
  }
  return null;
}

/**
 * The device this process trains on: the family's single device, or its local rank's
 * (`cuda:LOCAL_RANK`).
 *
 * @param choice The `--device` value.
 * @returns The device's name.
 */
export function processDevice(choice: TrainDevice): Device {
  return deviceName(choice, Number(Deno.env.get("LOCAL_RANK") ?? 0));
}

/**
 * The backend of the job's process group on `choice`.
 *
 * @param choice The `--device` value.
 * @returns "gloo" for a family in host memory, "auto" for one with memory of its own.
 */
export function groupBackend(choice: TrainDevice): BackendName {
  return FAMILIES[choice].hostMemory ? "gloo" : "auto";
}
