/**
 * The symbol table of `libdtrain.so` (csrc/core): the CPU kernels behind tensors, autograd, the
 * optimizers and data loading, one entry a line, grouped by source file in the order of their C
 * prototypes in csrc/core/dtrain.h, the one declaration of the ABI (tests/ffi/abi_test.ts checks
 * every symbol and parameter type of this table against it); the ABI enums follow. Every function
 * returning `i32` returns a status (0 = ok); the message of a failure is read with `dt_last_error`.
 * @module
 */

import { openLibrary, type Symbols } from "./load.ts";
import { preferOpenblasCore } from "./openblas_core.ts";

// The FFI's type names, short so that most entries fit on one line.
const ptr = "pointer", buf = "buffer", i32 = "i32", i64 = "i64", u64 = "u64", f32 = "f32";

const symbols = {
  // errors.c
  dt_last_error: { parameters: [buf, i64], result: i32 },
  // alloc.c
  dt_alloc: { parameters: [i64, i32], result: ptr },
  dt_free: { parameters: [ptr], result: "void" },
  dt_allocated_bytes: { parameters: [], result: i64 },
  dt_allocated_blocks: { parameters: [], result: i64 },
  // OpenBLAS's, found through libdtrain's dependencies; absent with another BLAS.
  openblas_get_corename: { parameters: [], result: ptr, optional: true },
  // parallel.c
  dt_set_num_threads: { parameters: [i32], result: "void" },
  dt_get_num_threads: { parameters: [], result: i32 },
  // matmul.c
  dt_matmul: {
    parameters: [ptr, ptr, ptr, i64, i64, i64, i32, i32, i64, i64, i64, f32, f32],
    result: i32,
  },
  dt_matmul_batched: {
    parameters: [ptr, ptr, ptr, i64, i64, i64, i64, i64, i64, i64, i32, i32, f32, f32],
    result: i32,
  },
  dt_linear_forward: { parameters: [ptr, ptr, ptr, ptr, i64, i64, i64, i32, i64], result: i32 },
  dt_linear_backward: {
    parameters: [ptr, ptr, ptr, ptr, ptr, ptr, i64, i64, i64, i32, i64],
    result: i32,
  },
  // matmul_bf16.c
  // deno-fmt-ignore
  dt_matmul_bf16: {
    parameters: [ptr, ptr, ptr, i64, i64, i64, i64, i64, i64, i64, i32, i32, i64, i64, i64, f32, f32],
    result: i32,
  },
  dt_matmul_bf16_backend: { parameters: [buf, i64], result: i32 },
  // elementwise.c
  dt_fill_f32: { parameters: [ptr, i64, f32], result: i32 },
  dt_fill_i32: { parameters: [ptr, i64, i32], result: i32 },
  dt_copy: { parameters: [ptr, ptr, i64], result: i32 },
  dt_cast_i32_f32: { parameters: [ptr, ptr, i64], result: i32 },
  dt_cast_f32_i32: { parameters: [ptr, ptr, i64], result: i32 },
  dt_cast_u16_i32: { parameters: [ptr, ptr, i64], result: i32 },
  dt_cast_f32_half: { parameters: [ptr, ptr, i64, i32], result: i32 },
  dt_cast_half_f32: { parameters: [ptr, i32, ptr, i64], result: i32 },
  dt_binary: { parameters: [i32, ptr, i64, ptr, i64, ptr, i64], result: i32 },
  dt_binary_backward: { parameters: [i32, ptr, i64, ptr, i64, ptr, i64, ptr, ptr], result: i32 },
  dt_unary: { parameters: [i32, ptr, ptr, i64, f32], result: i32 },
  dt_unary_backward: { parameters: [i32, ptr, ptr, ptr, ptr, i64, f32], result: i32 },
  dt_unary_reads: { parameters: [i32], result: i32 },
  dt_axpy: { parameters: [ptr, ptr, i64, f32], result: i32 },
  // slice.c
  dt_copy_strided: { parameters: [ptr, ptr, i32, buf, buf, i32], result: i32 },
  dt_copy_to_strided: { parameters: [ptr, ptr, i32, buf, buf, i32], result: i32 },
  // compare.c
  dt_compare: { parameters: [i32, i32, ptr, i64, ptr, i64, ptr, i64], result: i32 },
  dt_cast: { parameters: [ptr, i32, ptr, i32, i64], result: i32 },
  dt_fill_u8: { parameters: [ptr, i64, i32], result: i32 },
  dt_sum_axis_int: { parameters: [ptr, i32, ptr, i64, i64, i64], result: i32 },
  dt_binary_i32: { parameters: [i32, ptr, i64, ptr, i64, ptr, i64], result: i32 },
  // order.c
  dt_clamp: { parameters: [ptr, ptr, i64, f32, f32], result: i32 },
  dt_clamp_range: { parameters: [ptr, ptr, i64, f32, f32], result: i32 },
  dt_clamp_backward: { parameters: [ptr, ptr, ptr, i64, f32, f32], result: i32 },
  dt_abs: { parameters: [ptr, ptr, i64], result: i32 },
  dt_abs_backward: { parameters: [ptr, ptr, ptr, i64], result: i32 },
  dt_maximum: { parameters: [ptr, ptr, ptr, i64, i32], result: i32 },
  dt_maximum_backward: { parameters: [ptr, ptr, ptr, ptr, ptr, i64, i32], result: i32 },
  dt_max_rows: { parameters: [ptr, ptr, ptr, i64, i64, i32], result: i32 },
  dt_index_rows_backward: { parameters: [ptr, ptr, ptr, i64, i64], result: i32 },
  dt_extreme_backward: { parameters: [ptr, ptr, ptr, ptr, i64], result: i32 },
  // reduce.c
  dt_sum_axis: { parameters: [ptr, ptr, i64, i64, i64, f32], result: i32 },
  dt_expand_axis: { parameters: [ptr, ptr, i64, i64, i64, f32], result: i32 },
  dt_argmax_rows: { parameters: [ptr, ptr, i64, i64], result: i32 },
  dt_sum_squares: { parameters: [ptr, i64, ptr], result: i32 },
  // indexing.c
  dt_gather: { parameters: [ptr, buf, ptr, buf, i32, i32, ptr], result: i32 },
  dt_scatter_add: { parameters: [ptr, buf, ptr, buf, i32, i32, ptr], result: i32 },
  dt_index_select: { parameters: [ptr, ptr, i64, ptr, i64, i64, i64], result: i32 },
  dt_index_add: { parameters: [ptr, ptr, i64, ptr, i64, i64, i64], result: i32 },
  dt_copy_blocks: { parameters: [ptr, ptr, i64, i64, i64, i64], result: i32 },
  dt_where: { parameters: [ptr, i64, ptr, i64, ptr, i64, ptr, i64], result: i32 },
  dt_where_backward: { parameters: [ptr, i64, ptr, ptr, ptr, i64], result: i32 },
  dt_tril: { parameters: [ptr, ptr, i64, i64, i64, i64, i32], result: i32 },
  // nn.c
  dt_softmax: { parameters: [ptr, ptr, i64, i64, i32], result: i32 },
  dt_softmax_backward: { parameters: [ptr, ptr, ptr, i64, i64, i32], result: i32 },
  dt_mse: { parameters: [ptr, ptr, i64, ptr, ptr], result: i32 },
  dt_layernorm: { parameters: [ptr, ptr, ptr, ptr, ptr, ptr, i64, i64, f32], result: i32 },
  dt_layernorm_backward: {
    parameters: [ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, i64, i64],
    result: i32,
  },
  dt_embedding: { parameters: [ptr, ptr, ptr, i64, i64, i64], result: i32 },
  dt_embedding_backward: { parameters: [ptr, ptr, ptr, i64, i64, i64], result: i32 },
  dt_dropout: { parameters: [ptr, ptr, i64, f32, u64, u64], result: i32 },
  // cross_entropy.c
  dt_cross_entropy: { parameters: [ptr, ptr, i64, i64, i32, f32, i32, ptr, ptr], result: i32 },
  dt_cross_entropy_backward: { parameters: [ptr, ptr, ptr, i64, i64, i32], result: i32 },
  // attention.c
  // deno-fmt-ignore
  dt_attention_forward: { parameters: [ptr, ptr, ptr, ptr, ptr, ptr,
    buf, i64, i64, i64, i64, i64, i64, f32, i32, f32, u64, u64], result: i32 },
  // deno-fmt-ignore
  dt_attention_backward: { parameters: [ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr,
    buf, i64, i64, i64, i64, i64, i64, f32, i32, f32, u64, u64], result: i32 },
  // optim.c
  dt_sgd_step: { parameters: [ptr, ptr, ptr, i64, f32, f32, f32, i32, f32, i32], result: i32 },
  dt_adamw_step: {
    parameters: [ptr, ptr, ptr, ptr, i64, f32, f32, f32, f32, f32, i64],
    result: i32,
  },
  // random.c
  dt_rand_uniform: { parameters: [ptr, i64, f32, f32, u64, u64], result: i32 },
  dt_randn: { parameters: [ptr, i64, f32, f32, u64, u64], result: i32 },
  dt_randint: { parameters: [ptr, i64, i64, i64, u64, u64], result: i32 },
  // data.c
  dt_gather_u8_f32: { parameters: [ptr, i64, ptr, i64, i64, f32, f32, ptr], result: i32 },
  dt_gather_rows: { parameters: [ptr, i64, ptr, i64, i64, ptr], result: i32 },
  dt_gather_u8_i32: { parameters: [ptr, i64, ptr, i64, ptr], result: i32 },
  // mapped_file.c
  dt_map_file: { parameters: [buf, i32, buf, buf, buf], result: i32 },
  dt_unmap_file: { parameters: [ptr, i64], result: i32 },
} as const satisfies Deno.ForeignLibraryInterface;

/** The functions of `libdtrain.so` (64-bit sizes take numbers: [Note: 64-bit integers] in load.ts). */
export type DtrainSymbols = Symbols<typeof symbols>;

let opened: DtrainSymbols | undefined;

/**
 * Opens `libdtrain.so` once per process, on first call: `DTRAIN_LIB` if set, else `build/`, after
 * choosing OpenBLAS's kernels (ffi/openblas_core.ts). Only the cpu device
 * (src/tensor/device/cpu.ts) calls it; everything else goes through the device.
 *
 * @returns The library's functions.
 * @throws Error naming the paths tried and saying to run `make build`.
 */
export function loadDtrain(): DtrainSymbols {
  if (opened === undefined) {
    preferOpenblasCore(); // before libopenblas loads with libdtrain: it reads the variable then
    opened = openLibrary("libdtrain.so", "DTRAIN_LIB", symbols);
  }
  return opened;
}

// The numbers of the C enums, which the FFI cannot read: tests/ffi/enums_test.ts holds each to its
// enum in csrc/core/dtrain.h or scalar_math.h, name for name.

/** Status codes returned by the native functions (enum dt_status in csrc/core/dtrain.h). */
export const Status = {
  OK: 0,
  EINVAL: 1,
  ENOMEM: 2,
  /** What this machine or build lacks (a GPU, cuBLAS, a bf16 matmul engine): the message says which. */
  EUNSUPPORTED: 3,
  /** A CUDA runtime, cuBLAS or NCCL call failed (libdtrain_cuda only). */
  EDEVICE: 4,
} as const;

/** Elementwise binary ops (enum dt_binary_op in csrc/core/scalar_math.h). */
export const BinaryOp = { add: 0, sub: 1, mul: 2, div: 3 } as const;

/** Elementwise unary ops (enum dt_unary_op in csrc/core/scalar_math.h). */
export const UnaryOp = {
  relu: 0,
  geluTanh: 1,
  geluErf: 2,
  exp: 3,
  log: 4,
  tanh: 5,
  sigmoid: 6,
  neg: 7,
  sqrt: 8,
  pow: 9,
  scale: 10,
  addScalar: 11,
} as const;

/** Comparisons (enum dt_compare_op in csrc/core/dtrain.h). */
export const CompareOp = { eq: 0, ne: 1, lt: 2, le: 3, gt: 4, ge: 5 } as const;

/** Element types as the kernels number them (enum dt_dtype in csrc/core/dtrain.h). */
export const DTypeCode = { f32: 0, i32: 1, bool: 2, bf16: 3, f16: 4 } as const;

/** How a file mapping will be read: `dt_map_file`'s madvise hint (enum dt_map_access in csrc/core/dtrain.h). */
export const MapAccess = { normal: 0, random: 1, sequential: 2 } as const;

/** `dt_cross_entropy`'s reduction of the per-row losses (enum dt_reduction in csrc/core/dtrain.h). */
export const ReductionCode = { none: 0, mean: 1, sum: 2 } as const;

/** The symbol table itself: libdtrain_cuda.so exports the same kernels (ffi/cuda.ts shares it). */
export { symbols as dtrainSymbols };
