/**
 * The cuda device: libdtrain_cuda's stream-ordered allocator, pinned-staging copies and kernels
 * (csrc/cuda), one compute stream per GPU. The kernels are the seam's table (kernels.ts) bound to
 * libdtrain_cuda's functions of the same C names, each first making its GPU the current one when
 * another was in use, so kernels of `cuda:0` and `cuda:1` may interleave in one process. Kernels
 * run asynchronously: a status reports bad arguments at once, while a bad value found on the GPU
 * (an index out of range) is reported by the next copy to the host or `synchronize` (see [Note:
 * device-side errors] in csrc/cuda/internal.cuh).
 * @module
 */

import { CudaStatus } from "../../../ffi/cuda.ts";
import { NativeError } from "../native.ts";
import type { DeviceBackend } from "./device.ts";
import { copyInPinned } from "./cuda_pinned.ts";
import { checkCuda, cudaLastError, probeCuda, requireCuda, useCudaDevice } from "./cuda_runtime.ts";
import { bindKernels } from "./kernels.ts";

const devices = new Map<number, DeviceBackend>();

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
  const select = () => useCudaDevice(lib, index);
  select();
  const device: DeviceBackend = {
    name: `cuda:${index}`,
    isHostMemory: false,
    kernels: bindKernels(lib, (kernel) => (...args) => {
      select();
      return kernel(...args);
    }),
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
    copyInAsync: (copies) => copyInPinned(lib, index, copies),
    copy(dst, src, nbytes) {
      select();
      check(lib.dt_copy(dst, src, nbytes));
    },
    check,
  };
  devices.set(index, device);
  return device;
}
