/**
 * The device families, one record each: everything the layers above the seam decide about a
 * family (how its devices are made and named, whether its memory is the host's, autocast's dtype on
 * it, whether batches are pinned for it, whether it is usable here and how many devices it has)
 * is a field of its record, and its name is a key of {@linkcode FAMILIES}. No file above the seam
 * compares a device's name with a family's (tests/tensor/device_seam_test.ts holds that), so a
 * new family is its device file, its record here and, when its memory is its own, the communicator
 * its record names (docs/contributing.md, "Adding a device").
 * @module
 */

import type { HalfDType } from "../dtype.ts";
import { createCpuDevice } from "./cpu.ts";
import { createCudaDevice } from "./cuda.ts";
import * as cudaApi from "./cuda_api.ts";
import type { DeviceBackend, DeviceFactory } from "./device.ts";
import { createEmuDevice } from "./emu.ts";
import * as emuApi from "./emu_api.ts";

/** What dtrain knows of a device family before it makes one of its devices. */
export interface FamilyRecord {
  /** Makes the device for an index, on its first use (registry.ts caches it). */
  readonly create: DeviceFactory;
  /**
   * Whether the family has one device, named by the family alone (`"cpu"`), rather than devices
   * named `"family:index"`, one per process of a node (`"cuda:1"`).
   */
  readonly single: boolean;
  /**
   * Whether its memory is the host's: reached by the host's communicators, and by a process group
   * on "gloo". False for memory of its own, which `communicator` reaches.
   */
  readonly hostMemory: boolean;
  /**
   * The collective backend that reaches its own memory (a row of `BACKENDS` in
   * src/distributed/backends.ts, which derives what each row reaches from here); null for host memory.
   */
  readonly communicator: string | null;
  /** autocast's lower-precision dtype unless a scope says otherwise (PyTorch's defaults). */
  readonly autocastDtype: HalfDType;
  /** Whether the train job's batches reach it through page-locked memory (`pinMemory`). */
  readonly pinsBatches: boolean;
  /** The family in a sentence ("CUDA"). */
  readonly title: string;
  /** What one of its devices is called ("GPU"). */
  readonly unit: string;
  /** What `--device NAME` means, for the train job's help. */
  readonly summary: string;
  /** Whether this process can use it (never throws; `unavailableReason` says why not). */
  isAvailable(): boolean;
  /** Why it is not usable here, or `""`. */
  unavailableReason(): string;
  /** How many of its devices this process sees (call only when available). */
  deviceCount(): number;
  /**
   * The peak model FLOPs utilisation is a fraction of when the user gives none, for a family whose
   * devices have a nominal one (cuda: an A100's bf16, nanoGPT's unit); absent, the train job
   * measures its matmul rate instead.
   */
  readonly nominalPeak?: { readonly flops: number; readonly of: string };
}

/** An A100's bf16 dense peak in FLOP/s (312 T), the unit of nanoGPT's `estimate_mfu`. */
export const A100_BF16_PEAK_FLOPS = 312e12;

/** The families dtrain ships, by name. */
export const FAMILIES = {
  cpu: {
    create: (): DeviceBackend => createCpuDevice(),
    single: true,
    hostMemory: true,
    communicator: null,
    // PyTorch's CPU autocast default.
    autocastDtype: "bf16",
    pinsBatches: false,
    title: "the CPU",
    unit: "CPU",
    summary: "the host's processors, shared by a node's processes",
    isAvailable: (): boolean => true,
    unavailableReason: (): string => "",
    deviceCount: (): number => 1,
  },
  cuda: {
    create: createCudaDevice,
    nominalPeak: { flops: A100_BF16_PEAK_FLOPS, of: "an A100's bf16" },
    single: false,
    hostMemory: false,
    communicator: "nccl",
    // PyTorch's CUDA autocast default.
    autocastDtype: "f16",
    pinsBatches: true,
    title: "CUDA",
    unit: "GPU",
    summary: "one GPU per process",
    isAvailable: cudaApi.isAvailable,
    unavailableReason: cudaApi.unavailableReason,
    deviceCount: cudaApi.deviceCount,
  },
  emu: {
    create: createEmuDevice,
    single: false,
    hostMemory: false,
    communicator: "emu",
    // An accelerator's, as CUDA's: the emulated device stands in for a GPU.
    autocastDtype: "f16",
    pinsBatches: true,
    title: "the emulated accelerator",
    unit: "emu device",
    summary: "an emulated GPU per process, over the CPU kernels (for CI)",
    isAvailable: emuApi.isAvailable,
    unavailableReason: emuApi.unavailableReason,
    deviceCount: emuApi.deviceCount,
  },
} as const satisfies Record<string, FamilyRecord>;

/** The name of a family dtrain ships (`"cpu"`, `"cuda"`, `"emu"`). */
export type FamilyName = keyof typeof FAMILIES;

/** The families whose memory is their own (not the host's), each reached by its communicator. */
export type OwnMemoryFamily = {
  [F in FamilyName]: (typeof FAMILIES)[F]["hostMemory"] extends false ? F : never;
}[FamilyName];

/** The communicator each family with memory of its own names (`"nccl"` for `"cuda"`). */
export type CommunicatorName = (typeof FAMILIES)[OwnMemoryFamily]["communicator"];

/** Every family's name, in the table's order. */
export const FAMILY_NAMES = Object.keys(FAMILIES) as FamilyName[];

/** The families whose memory is their own, in the table's order. */
export const OWN_MEMORY_FAMILIES = FAMILY_NAMES.filter((name): name is OwnMemoryFamily =>
  !FAMILIES[name].hostMemory
);

/** The device tensors are made on unless said otherwise, and which `repr` leaves unnamed. */
export const DEFAULT_DEVICE = "cpu";

/**
 * The family `pinMemory` targets when no device is named (PyTorch pins for the current
 * accelerator, a GPU).
 */
export const DEFAULT_ACCELERATOR: FamilyName = "cuda";

/**
 * Whether `name` is a family dtrain ships.
 *
 * @param name A family's name, without an index.
 * @returns True for a key of {@linkcode FAMILIES}.
 */
export function isFamilyName(name: string): name is FamilyName {
  return Object.hasOwn(FAMILIES, name);
}

/**
 * The family of a device name (`"emu:1"` is `"emu"`, `"cpu"` is `"cpu"`), or null for a device of
 * a family registered at run time (or no device at all).
 *
 * @param device A device name, as tensors carry it.
 * @returns The family's name, or null.
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { familyOf } from "./family.ts";
 * assert.equal(familyOf("cuda:1"), "cuda");
 * assert.equal(familyOf("tpu:0"), null);
 * ```
 */
export function familyOf(device: string): FamilyName | null {
  const family = device.split(":")[0];
  return isFamilyName(family) ? family : null;
}

/**
 * The name of device `index` of `family`: `"cuda:1"`, or the family alone for a single device.
 *
 * @param family The family.
 * @param index The device, from 0 (a process's local rank).
 * @returns The device's canonical name.
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { deviceName } from "./family.ts";
 * assert.equal(deviceName("cpu", 3), "cpu");
 * assert.equal(deviceName("emu", 3), "emu:3");
 * ```
 */
export function deviceName(family: FamilyName, index: number): string {
  return FAMILIES[family].single ? family : `${family}:${index}`;
}
