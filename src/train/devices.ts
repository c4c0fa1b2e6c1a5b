/**
 * The devices `--device` names: the cpu, or an accelerator family whose `torch.cuda`-like
 * namespace says whether it is usable and how many devices this machine has: `cuda` (GPUs) and
 * `emu` (the emulated accelerator, everywhere; see src/tensor/device/emu.ts). Each process of a
 * node trains on the device of its local rank, as torchrun's convention has it, and an
 * accelerator's process group is "auto": its device collectives for the model, host ones for the
 * rest.
 * @module
 */

import type { BackendName } from "../dist/backend.ts";
import { cuda, emu } from "../tensor/device/mod.ts";
import type { Device } from "../tensor/storage.ts";

/** What the job asks of an accelerator family: its namespace, and what messages call it. */
interface Accelerator {
  /** The family's name in a sentence ("CUDA"). */
  title: string;
  /** What one of its devices is called ("GPU"). */
  unit: string;
  /** `cuda` or `emu`: availability with its reason, and the device count. */
  api: { isAvailable(): boolean; unavailableReason(): string; deviceCount(): number };
}

/** The accelerator families `--device` takes, by name. */
export const ACCELERATORS: Readonly<Record<"cuda" | "emu", Accelerator>> = {
  cuda: { title: "CUDA", unit: "GPU", api: cuda },
  emu: { title: "the emulated accelerator", unit: "emu device", api: emu },
};

/** A `--device` value. */
export type TrainDevice = "cpu" | keyof typeof ACCELERATORS;

/**
 * Why the job cannot run on `device` with `nprocPerNode` processes a node, or null when it can.
 *
 * @param choice The `--device` value.
 * @param nprocPerNode Processes per node, one per device.
 * @returns The message for the user, or null.
 */
export function deviceProblem(choice: TrainDevice, nprocPerNode: number): string | null {
  if (choice === "cpu") return null;
  const { title, unit, api } = ACCELERATORS[choice];
  if (!api.isAvailable()) {
    return `--device ${choice}: ${title} is not available: ${api.unavailableReason()}`;
  }
  const count = api.deviceCount();
  if (nprocPerNode > count) {
    return `--device ${choice} runs one process per ${unit}, but --nproc-per-node is ` +
      `${nprocPerNode} and this machine has ${count} ${unit}${count === 1 ? "" : "s"}`;
  }
  return null;
}

/**
 * The device this process trains on: the cpu, or its local rank's (`cuda:LOCAL_RANK`).
 *
 * @param choice The `--device` value.
 * @returns The device's name.
 */
export function processDevice(choice: TrainDevice): Device {
  return choice === "cpu" ? "cpu" : `${choice}:${Number(Deno.env.get("LOCAL_RANK") ?? 0)}`;
}

/**
 * The backend of the job's process group on `choice`.
 *
 * @param choice The `--device` value.
 * @returns "gloo" on the cpu, "auto" on an accelerator.
 */
export function groupBackend(choice: TrainDevice): BackendName {
  return choice === "cpu" ? "gloo" : "auto";
}
