/**
 * The cpu device: libdtrain's allocator and kernels (OpenBLAS for matrix products). The kernel
 * table holds the FFI functions themselves, so the hot paths cost one native call, as before the
 * seam existed.
 * @module
 */

import { type DtrainSymbols, loadDtrain, Status } from "../../../ffi/dtrain.ts";
import { NativeArgumentError, NativeError } from "../native.ts";
import type { DeviceBackend, Kernels } from "./device.ts";

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
  const kernels: Kernels = {
    matmul: lib.dt_matmul,
    matmulBatched: lib.dt_matmul_batched,
    linearForward: lib.dt_linear_forward,
    linearBackward: lib.dt_linear_backward,
    fillF32: lib.dt_fill_f32,
    fillI32: lib.dt_fill_i32,
    copyStrided: lib.dt_copy_strided,
    castI32F32: lib.dt_cast_i32_f32,
    castF32I32: lib.dt_cast_f32_i32,
    binary: lib.dt_binary,
    binaryBackward: lib.dt_binary_backward,
    unary: lib.dt_unary,
    unaryBackward: lib.dt_unary_backward,
    axpy: lib.dt_axpy,
    sumAxis: lib.dt_sum_axis,
    expandAxis: lib.dt_expand_axis,
    argmaxRows: lib.dt_argmax_rows,
    softmax: lib.dt_softmax,
    softmaxBackward: lib.dt_softmax_backward,
    crossEntropy: lib.dt_cross_entropy,
    mse: lib.dt_mse,
    layernorm: lib.dt_layernorm,
    layernormBackward: lib.dt_layernorm_backward,
    embedding: lib.dt_embedding,
    embeddingBackward: lib.dt_embedding_backward,
    dropout: lib.dt_dropout,
    randUniform: lib.dt_rand_uniform,
    randn: lib.dt_randn,
    sgdStep: lib.dt_sgd_step,
    adamwStep: lib.dt_adamw_step,
    gatherU8F32: lib.dt_gather_u8_f32,
    gatherRows: lib.dt_gather_rows,
    gatherU8I32: lib.dt_gather_u8_i32,
  };
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
