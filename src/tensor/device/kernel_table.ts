/**
 * The one mapping from libdtrain's C names to the seam's kernel names, shared by every device
 * whose native library exports libdtrain's prototypes (cpu.ts, cuda.ts).
 * @module
 */

import type { DtrainSymbols } from "../../../ffi/dtrain.ts";
import type { Kernels } from "./device.ts";

/** The functions of a library that exports libdtrain's kernel prototypes. */
export type KernelSymbols = Omit<
  DtrainSymbols,
  | "dt_last_error"
  | "dt_alloc"
  | "dt_free"
  | "dt_allocated_bytes"
  | "dt_allocated_blocks"
  | "dt_copy"
  | "dt_set_num_threads"
  | "dt_get_num_threads"
>;

/**
 * The kernel table of a library: its FFI functions themselves, so a kernel call is one native call.
 *
 * @param lib The opened library.
 * @returns The seam's kernel table.
 */
export function kernelTable(lib: KernelSymbols): Kernels {
  return {
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
}
