/**
 * The cuda device: libdtrain_cuda's stream-ordered allocator, pinned-staging copies and kernels
 * (csrc/cuda), one compute stream per GPU. The kernels are the cpu device's, by name, each first
 * making its GPU the current one when another was in use, so kernels of `cuda:0` and `cuda:1` may
 * interleave in one process. Kernels run asynchronously: a status reports bad
 * arguments at once, while a bad value found on the GPU (an index out of range) is reported by
 * the next copy to the host or `synchronize` (see [Note: device-side errors] in
 * csrc/cuda/internal.cuh).
 * @module
 */

import { CudaStatus, type CudaSymbols, loadCuda } from "../../../ffi/cuda.ts";
import { NativeArgumentError, NativeError } from "../native.ts";
import type { DeviceBackend, Kernels } from "./device.ts";
import { getDevice } from "./registry.ts";

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
const devices = new Map<number, DeviceBackend>();

const messageBuffer = new Uint8Array(1024);

/** The calling thread's last libdtrain_cuda error message. */
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
 * Makes GPU `index` the one the library's calls on this thread go to.
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
 * The C name of a kernel of the seam: `matmulBatched` is `dt_matmul_batched`.
 *
 * @param name The kernel's name in the Kernels table.
 * @returns Its libdtrain symbol.
 */
export function kernelSymbol(name: string): string {
  return `dt_${name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)}`;
}

/**
 * The kernel table of GPU `index`: every kernel the cpu device has (cpu.ts holds the one typed
 * mapping from C names to the seam's names), bound to libdtrain_cuda's function of the same C
 * name (`matmulBatched` is `dt_matmul_batched`), each first switching to GPU `index` when another
 * is current. The library exports libdtrain's whole kernel ABI, so no kernel is missing.
 */
function kernelsOn(lib: CudaSymbols, index: number): Kernels {
  const table = lib as unknown as Record<string, (...args: unknown[]) => number>;
  const bound: Record<string, unknown> = {};
  for (const name of Object.keys(getDevice("cpu").kernels)) {
    const symbol = kernelSymbol(name);
    const call = table[symbol];
    if (call === undefined) throw new Error(`libdtrain_cuda.so has no ${symbol} (kernel ${name})`);
    bound[name] = (...args: unknown[]) => {
      if (active !== index) useCudaDevice(lib, index);
      return call(...args);
    };
  }
  return bound as unknown as Kernels;
}

/**
 * Makes the device `cuda:index` (called by the registry on its first use; one object per GPU).
 *
 * @param index The GPU, as CUDA numbers the visible ones.
 * @returns The device.
 * @throws Error with the reason when CUDA is unavailable or the index is out of range.
 */
export function createCudaDevice(index: number): DeviceBackend {
  const known = devices.get(index);
  if (known !== undefined) return known;
  const lib = requireCuda(`device "cuda:${index}"`);
  const count = probeCuda().count;
  if (index >= count) {
    throw new RangeError(
      `device "cuda:${index}" does not exist: this process sees ${count} GPU${
        count === 1 ? "" : "s"
      } (CUDA_VISIBLE_DEVICES narrows them)`,
    );
  }
  const check = (status: number) => checkCuda(lib, status);
  useCudaDevice(lib, index);
  const select = () => {
    if (active !== index) useCudaDevice(lib, index);
  };
  const device: DeviceBackend = {
    name: `cuda:${index}`,
    isHostMemory: false,
    kernels: kernelsOn(lib, index),
    alloc(nbytes, zero) {
      select();
      const ptr = lib.dt_alloc(nbytes, zero ? 1 : 0);
      if (ptr === null) throw new NativeError(CudaStatus.ENOMEM, cudaLastError(lib));
      return { ptr };
    },
    free(block) {
      lib.dt_free(block.ptr);
    },
    allocatedBytes: () => Number(lib.dt_cuda_allocated_bytes_on(index)),
    copyIn(dst, hostSrc, nbytes) {
      select();
      check(lib.dt_cuda_copy_in(dst, hostSrc, nbytes));
    },
    copyOut(hostDst, src, nbytes) {
      select();
      check(lib.dt_cuda_copy_out(hostDst, src, nbytes));
    },
    copy(dst, src, nbytes) {
      select();
      check(lib.dt_copy(dst, src, nbytes));
    },
    check,
  };
  devices.set(index, device);
  return device;
}
