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
  /** `cuda` or `emu`: availability with its reason, and the device count. */
  api: { isAvailable(): boolean; unavailableReason(): string; deviceCount(): number };
}

/** The accelerator families `--device` takes, by name. */
export const ACCELERATORS: Readonly<Record<"cuda" | "emu", Accelerator>> = {
  cuda: { title: "CUDA", api: cuda },
  emu: { title: "the emulated accelerator", api: emu },
};

/** A `--device` value. */
export type TrainDevice = "cpu" | keyof typeof ACCELERATORS;

/**
 * Why the job cannot run on `device` with `nprocPerNode` processes a node, or null when it can.
 *
 * @param device The `--device` value.
 * @param nprocPerNode Processes per node, one per device.
 * @returns The message for the user, or null.
 */
export function deviceProblem(device: TrainDevice, nprocPerNode: number): string | null {
  if (device === "cpu") return null;
  const { title, api } = ACCELERATORS[device];
  if (!api.isAvailable()) {
    return `--device ${device}: ${title} is not available: ${api.unavailableReason()}`;
  }
  const count = api.deviceCount();
  if (nprocPerNode > count) {
    const devices = `${device === "cuda" ? "GPU" : "emu device"}${count === 1 ? "" : "s"}`;
    return `--device ${device} runs one process per ${device === "cuda" ? "GPU" : "device"}, ` +
      `but --nproc-per-node is ${nprocPerNode} and this machine has ${count} ${devices}`;
  }
  return null;
}

/**
 * The device this process trains on: the cpu, or its local rank's (`cuda:LOCAL_RANK`).
 *
 * @param device The `--device` value.
 * @returns The device's name.
 */
export function processDevice(device: TrainDevice): Device {
  return device === "cpu" ? "cpu" : `${device}:${Number(Deno.env.get("LOCAL_RANK") ?? 0)}`;
}

/**
 * The backend of the job's process group on `device`.
 *
 * @param device The `--device` value.
 * @returns "gloo" on the cpu, "auto" on an accelerator.
 */
export function groupBackend(device: TrainDevice): BackendName {
  return device === "cpu" ? "gloo" : "auto";
}
