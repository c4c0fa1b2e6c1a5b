/**
 * The cpu device: libdtrain's allocator and kernels (OpenBLAS for matrix products). The kernel
 * table holds the FFI functions themselves, so the hot paths cost one native call, as before the
 * seam existed.
 * @module
 */

import { type DtrainSymbols, loadDtrain, Status } from "../../../ffi/dtrain.ts";
import { NativeArgumentError, NativeError } from "../native.ts";
import type { DeviceBackend } from "./device.ts";
import { kernelTable } from "./kernel_table.ts";

const messageBuffer = new Uint8Array(512);

/** The calling thread's last libdtrain error message. */
function lastError(lib: DtrainSymbols): string {
  const length = lib.dt_last_error(messageBuffer, messageBuffer.length);
  return new TextDecoder().decode(
    messageBuffer.subarray(0, Math.min(length, messageBuffer.length - 1)),
  );
}

/**
 * Makes the cpu device (called once, by the registry, on the first cpu tensor); this is where
 * `libdtrain.so` is opened.
 */
export function createCpuDevice(): DeviceBackend {
  const lib = loadDtrain();
  const check = (status: number): void => {
    if (status === Status.OK) return;
    if (status === Status.EINVAL) throw new NativeArgumentError(lastError(lib));
    throw new NativeError(status, lastError(lib));
  };
  const copy = (dst: Deno.PointerValue, src: Deno.PointerValue, nbytes: number): void => {
    check(lib.dt_copy(dst, src, nbytes));
  };
  const kernels = kernelTable(lib);
  return {
    name: "cpu",
    kernels,
    alloc(nbytes, zero) {
      const ptr = lib.dt_alloc(nbytes, zero ? 1 : 0);
      if (ptr === null) throw new NativeError(Status.ENOMEM, lastError(lib));
      return ptr;
    },
    free(ptr) {
      lib.dt_free(ptr);
    },
    allocatedBytes: () => Number(lib.dt_allocated_bytes()),
    // Host memory is device memory here: the three copies are one memcpy.
    copyIn: copy,
    copyOut: copy,
    copy,
    check,
  };
}

/**
 * Sets how many threads the cpu kernels use (libdtrain's pool and OpenBLAS).
 *
 * @param n A positive integer (checked by the caller).
 */
export function setCpuThreads(n: number): void {
  loadDtrain().dt_set_num_threads(n);
}

/** How many threads the cpu kernels use. */
export function getCpuThreads(): number {
  return loadDtrain().dt_get_num_threads();
}
