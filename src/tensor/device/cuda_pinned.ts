/**
 * Batches to a GPU through page-locked host memory, for the DataLoader's `pinMemory`: the
 * pointer-level call into csrc/cuda/pinned.cu, whose [Note: pinned batch ring] says how the
 * asynchronous copies are ordered against the compute stream and when a buffer is reused.
 * @module
 */

import { checkCuda, probeCuda, requireCuda, useCudaDevice } from "./cuda.ts";
import type { DevicePtr } from "./device.ts";

/** One block to copy: `nbytes` from host memory at `src` to GPU memory at `dst`. */
export interface PinnedField {
  /** The destination, in the GPU's memory. */
  dst: DevicePtr;
  /** The source, in host memory; free to reuse once {@linkcode copyInPinned} returns. */
  src: DevicePtr;
  /** Bytes to copy. */
  nbytes: number;
}

/** The index of a GPU's name (`"cuda"` is 0, `"cuda:1"` is 1). */
function cudaIndex(device: string): number {
  const match = /^cuda(?::(\d+))?$/.exec(device);
  if (match === null) throw new RangeError(`"${device}" is not a cuda device name`);
  return Number(match[1] ?? 0);
}

/**
 * Copies each field from host memory to GPU `device` through the GPU's ring of page-locked
 * buffers, on its copy stream. Returns once the sources may be reused; the copies complete before
 * any work queued afterwards on the GPU's compute stream starts.
 *
 * @param device The GPU (`"cuda:0"`).
 * @param fields The blocks to copy, one per batch field.
 * @throws Error with the reason when CUDA is unavailable; the library's error otherwise.
 */
export function copyInPinned(device: string, fields: readonly PinnedField[]): void {
  const lib = requireCuda(`pinMemory on "${device}": CUDA`);
  useCudaDevice(lib, cudaIndex(device));
  const dsts = new BigUint64Array(fields.length);
  const srcs = new BigUint64Array(fields.length);
  const nbytes = new BigInt64Array(fields.length);
  fields.forEach((field, i) => {
    dsts[i] = BigInt(Deno.UnsafePointer.value(field.dst));
    srcs[i] = BigInt(Deno.UnsafePointer.value(field.src));
    nbytes[i] = BigInt(field.nbytes);
  });
  checkCuda(lib, lib.dt_cuda_copy_in_pinned(fields.length, dsts, srcs, nbytes));
}

/**
 * Page-locked host bytes the pinned ring of a GPU holds: 0 before its first batch (or without
 * CUDA), then the two buffers' sizes, which grow only when a batch outgrows them.
 *
 * @param device The GPU (default `cuda:0`).
 * @returns The bytes.
 */
export function pinnedBytes(device: string = "cuda:0"): number {
  const lib = probeCuda().lib;
  return lib === null ? 0 : Number(lib.dt_cuda_pinned_bytes(cudaIndex(device)));
}
