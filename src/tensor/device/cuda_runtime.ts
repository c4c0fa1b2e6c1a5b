/**
 * libdtrain_cuda's runtime, shared by the cuda device, its pinned copies, the `cuda` namespace and
 * the NCCL backend: opening the library and counting GPUs once (saying why when there is none to
 * use), its errors, and which GPU the library's calls go to.
 * @module
 */

import { CudaStatus, type CudaSymbols, loadCuda } from "../../../ffi/cuda.ts";
import { NativeArgumentError, NativeError } from "../native.ts";

/** What probing found: the library and the number of GPUs, or why there is none to use. */
export interface CudaProbe {
  /** The opened library (null when it could not be loaded). */
  lib: CudaSymbols | null;
  /** GPUs this process sees (0 when unavailable). */
  count: number;
  /** Why CUDA is unavailable ("" when it is available). */
  reason: string;
}

let probed: CudaProbe | null = null;
/** The GPU the library's calls on the JavaScript thread go to now (-1: none chosen yet). */
let active = -1;

const messageBuffer = new Uint8Array(1024);

/**
 * The calling thread's last libdtrain_cuda error message.
 *
 * @param lib The opened library.
 * @returns The message.
 */
export function cudaLastError(lib: CudaSymbols): string {
  const length = lib.dt_last_error(messageBuffer, messageBuffer.length);
  return new TextDecoder().decode(
    messageBuffer.subarray(0, Math.min(length, messageBuffer.length - 1)),
  );
}

/**
 * Opens the library and counts GPUs, once per process; never throws. The reason names what is
 * missing: the library (not built: no nvcc at build time), the driver, or a device.
 *
 * @returns The probe's result.
 */
export function probeCuda(): CudaProbe {
  if (probed !== null) return probed;
  let lib: CudaSymbols;
  try {
    lib = loadCuda();
  } catch (err) {
    // The first path tried and its dlopen error (the loader's message lists every path).
    const tried = (err as Error).message.split("\n")[1]?.trim() ?? (err as Error).message;
    return probed = {
      lib: null,
      count: 0,
      reason: "no CUDA library: build/libdtrain_cuda.so is built by `make build` only where " +
        `nvcc is found (${tried})`,
    };
  }
  const count = new Int32Array(1);
  const status = lib.dt_cuda_device_count(count);
  probed = status === CudaStatus.OK
    ? { lib, count: count[0], reason: "" }
    : { lib, count: 0, reason: cudaLastError(lib) };
  return probed;
}

/**
 * The opened library, when CUDA is usable.
 *
 * @param what What needs it, for the message (`device "cuda:0"` gives `device "cuda:0" is not available: ...`).
 * @returns The library.
 * @throws Error with the probe's reason when CUDA is unavailable.
 */
export function requireCuda(what: string): CudaSymbols {
  const probe = probeCuda();
  if (probe.lib === null || probe.count === 0) {
    throw new Error(`${what} is not available: ${probe.reason}`);
  }
  return probe.lib;
}

/**
 * Throws the library's error for a non-OK status: a RangeError for a bad argument, a NativeError
 * with the status otherwise.
 *
 * @param lib The opened library.
 * @param status A status returned by one of its functions.
 */
export function checkCuda(lib: CudaSymbols, status: number): void {
  if (status === CudaStatus.OK) return;
  if (status === CudaStatus.EINVAL) throw new NativeArgumentError(cudaLastError(lib));
  throw new NativeError(status, cudaLastError(lib));
}

/**
 * Makes GPU `index` the one the library's calls on this thread go to (nothing when it is already).
 *
 * @param lib The opened library.
 * @param index The GPU.
 */
export function useCudaDevice(lib: CudaSymbols, index: number): void {
  if (active === index) return;
  checkCuda(lib, lib.dt_cuda_use_device(index));
  active = index;
}

/**
 * The index of a GPU given by number or name (`1` and `"cuda:1"` are 1, `"cuda"` is 0).
 *
 * @param device The GPU.
 * @param what Who asks, for the message.
 * @returns The index.
 * @throws RangeError for a name that is not a cuda device's.
 */
export function cudaIndex(device: number | string, what: string): number {
  if (typeof device === "number") return device;
  const match = /^cuda(?::(\d+))?$/.exec(device);
  if (match === null) throw new RangeError(`${what}: "${device}" is not a cuda device name`);
  return Number(match[1] ?? 0);
}
