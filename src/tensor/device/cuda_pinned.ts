/**
 * Host-to-GPU copies through page-locked host memory, the cuda device's `copyInAsync` (the
 * DataLoader's `pinMemory`): the pointer-level call into csrc/cuda/pinned.cu, whose [Note: pinned
 * batch ring] says how the asynchronous copies are ordered against the compute stream and when a
 * buffer is reused.
 * @module
 */

import type { CudaSymbols } from "../../../ffi/cuda.ts";
import type { HostCopy } from "./device.ts";
import { checkCuda, cudaIndex, probeCuda, useCudaDevice } from "./cuda_runtime.ts";

/**
 * Copies each block from host memory to GPU `index` through the GPU's ring of page-locked
 * buffers, on its copy stream. Returns once the sources may be reused; the copies complete before
 * any work queued afterwards on the GPU's compute stream starts.
 *
 * @param lib The opened library.
 * @param index The GPU.
 * @param copies The blocks to copy.
 * @throws The library's error.
 */
export function copyInPinned(lib: CudaSymbols, index: number, copies: readonly HostCopy[]): void {
  useCudaDevice(lib, index);
  const dsts = new BigUint64Array(copies.length);
  const srcs = new BigUint64Array(copies.length);
  const nbytes = new BigInt64Array(copies.length);
  copies.forEach((copy, i) => {
    dsts[i] = BigInt(Deno.UnsafePointer.value(copy.dst));
    srcs[i] = BigInt(Deno.UnsafePointer.value(copy.src));
    nbytes[i] = BigInt(copy.nbytes);
  });
  checkCuda(lib, lib.dt_cuda_copy_in_pinned(copies.length, dsts, srcs, nbytes));
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
  return lib === null ? 0 : Number(lib.dt_cuda_pinned_bytes(cudaIndex(device, "pinnedBytes")));
}
