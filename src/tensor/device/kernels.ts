/**
 * The kernels of the device seam, declared once: each kernel's name in the seam, the libdtrain
 * function it is (by C name, so its prototype is ffi/dtrain.ts's entry), and what it does. Every
 * device builds its table from this one with {@linkcode bindKernels}: the cpu device from
 * libdtrain, the cuda device from libdtrain_cuda, which exports the same prototypes. A new kernel
 * is one line here and its entry in ffi/dtrain.ts (tests/tensor/kernels_test.ts checks the two
 * agree).
 * @module
 */

import type { DtrainSymbols } from "../../../ffi/dtrain.ts";

/** libdtrain's functions, by C name: the prototypes every device's kernels follow. */
export type KernelAbi = DtrainSymbols;

/**
 * Each kernel's seam name and C name, with what it does. Every kernel returns a native status (0 =
 * OK) for `DeviceBackend.check`; pointers are device pointers, except where the comment says host
 * (the gathers' sources and indices, the strided copies' shapes). Op codes are the ABI enums of
 * ffi/dtrain.ts.
 */
export const kernelSymbols = {
  /** c = alpha * op(a) @ op(b) + beta * c (sgemm; `trans*` 0 or 1, leading dimensions `ld*`). */
  matmul: "dt_matmul",
  /** `batch` products of contiguous matrices `stride*` elements apart. */
  matmulBatched: "dt_matmul_batched",
  /** y = x @ op(w) + bias (bias nullable) for `rows` rows. */
  linearForward: "dt_linear_forward",
  /** The gradients of `linearForward` (each output nullable). */
  linearBackward: "dt_linear_backward",
  /** Sets `n` f32 elements to `value`. */
  fillF32: "dt_fill_f32",
  /** Sets `n` i32 elements to `value`. */
  fillI32: "dt_fill_i32",
  /** Copies a strided view into contiguous memory (`shape`, `strides` in host memory). */
  copyStrided: "dt_copy_strided",
  /** i32 to f32, `n` elements. */
  castI32F32: "dt_cast_i32_f32",
  /** f32 to i32 (toward zero), `n` elements. */
  castF32I32: "dt_cast_f32_i32",
  /** out = a op b, b or a repeating when shorter (`BinaryOp`). */
  binary: "dt_binary",
  /** The gradients of `binary` (each output nullable). */
  binaryBackward: "dt_binary_backward",
  /** y = op(x, p) (`UnaryOp`). */
  unary: "dt_unary",
  /** The gradient of `unary`, reading x or y as the op needs (the other nullable). */
  unaryBackward: "dt_unary_backward",
  /**
   * What `unaryBackward` reads for an op: 0 nothing, 1 x, 2 y (-1: unknown op). An answer, not a
   * status: the native header says it once (csrc/core/scalar_math.h), and autograd asks it.
   */
  unaryReads: "dt_unary_reads",
  /** y += alpha * x. */
  axpy: "dt_axpy",
  /** out[o, i] = scale * sum over a of x[o, a, i]. */
  sumAxis: "dt_sum_axis",
  /** The gradient of `sumAxis`: gy broadcast back over the axis, times scale. */
  expandAxis: "dt_expand_axis",
  /** The i32 index of each row's maximum. */
  argmaxRows: "dt_argmax_rows",
  /** Softmax (log = 1: log-softmax) over rows. */
  softmax: "dt_softmax",
  /** The gradient of `softmax` from its output. */
  softmaxBackward: "dt_softmax_backward",
  /** Cross-entropy (reduction, smoothing) into `loss`, and its gradient into `grad` (nullable). */
  crossEntropy: "dt_cross_entropy",
  /** Mean squared error into `loss`, and d loss / d a into `ga` (nullable). */
  mse: "dt_mse",
  /** Layer norm over rows, saving mean and 1/std (w, b nullable). */
  layernorm: "dt_layernorm",
  /** The gradients of `layernorm` (dw, db accumulated; outputs nullable). */
  layernormBackward: "dt_layernorm_backward",
  /** Rows of `weight` picked by i32 `indices`. */
  embedding: "dt_embedding",
  /** The gradient of `embedding`, accumulated into `gweight`. */
  embeddingBackward: "dt_embedding_backward",
  /** Dropout with the counter RNG at (seed, offset); the same call recomputes the mask. */
  dropout: "dt_dropout",
  /** U[lo, hi) samples from counters offset.. of `seed`. */
  randUniform: "dt_rand_uniform",
  /** N(mean, std²) samples from counters offset.. of `seed` (two per element). */
  randn: "dt_randn",
  /** One fused SGD update (momentumBuf nullable; first = 1 seeds it). */
  sgdStep: "dt_sgd_step",
  /** One fused AdamW update at step `step` (1-based). */
  adamwStep: "dt_adamw_step",
  /** dst rows = (host u8 src rows at host i32 `indices`) * scale + shift. */
  gatherU8F32: "dt_gather_u8_f32",
  /** dst rows = src rows at host i32 `indices` (`rowBytes` each). */
  gatherRows: "dt_gather_rows",
  /** dst = host u8 src at host i32 `indices`, as i32. */
  gatherU8I32: "dt_gather_u8_i32",
  /** Fused attention forward over [bh, t, d] blocks, saving each query row's log-sum-exp. */
  attentionForward: "dt_attention_forward",
  /** The gradients of `attentionForward`, recomputing the probabilities from the log-sum-exp. */
  attentionBackward: "dt_attention_backward",
  /** Scatters contiguous memory into a strided view (`shape`, `strides` in host memory). */
  copyToStrided: "dt_copy_to_strided",
  /** y = min(max(x, lo), hi). */
  clamp: "dt_clamp",
  /** The gradient of `clamp`: gy where lo <= x <= hi. */
  clampBackward: "dt_clamp_backward",
  /** y = |x|. */
  abs: "dt_abs",
  /** The gradient of `abs`: sign(x) * gy. */
  absBackward: "dt_abs_backward",
  /** Elementwise maximum (is_min = 1: minimum) of equal-shaped operands. */
  maximum: "dt_maximum",
  /** The gradients of `maximum`, halved on ties (outputs nullable). */
  maximumBackward: "dt_maximum_backward",
  /** Each row's largest (smallest) value and its i32 index (indices nullable). */
  maxRows: "dt_max_rows",
  /** gy scattered to each row's index, zeros elsewhere. */
  indexRowsBackward: "dt_index_rows_backward",
  /** gy shared evenly between the elements equal to `value`. */
  extremeBackward: "dt_extreme_backward",
  /** The gradient of `crossEntropy` from its saved `grad` and gy (one value, or one per row). */
  crossEntropyBackward: "dt_cross_entropy_backward",
  /** out (bool) = a op b (`CompareOp`), both of one dtype (`DTypeCode`), b or a repeating. */
  compare: "dt_compare",
  /** Converts between dtypes (`DTypeCode`), one side at least bool. */
  cast: "dt_cast",
  /** Sets `n` bool elements to `value` (non-zero is true). */
  fillU8: "dt_fill_u8",
  /** out[o, i] (i32) = sum over a of i32 or bool x[o, a, i]. */
  sumAxisInt: "dt_sum_axis_int",
  /** out = a op b on i32 (`BinaryOp`; div is floor division). */
  binaryI32: "dt_binary_i32",
  /** y = min(max(x, lo), hi) on f32. */
  clampRange: "dt_clamp_range",
  /** out = x gathered along `dim` at i32 `index` (shapes in host memory). */
  gather: "dt_gather",
  /** The gradient of `gather`, added into a zeroed gx. */
  scatterAdd: "dt_scatter_add",
  /** out[o, j, :] = x[o, index[j], :]. */
  indexSelect: "dt_index_select",
  /** The gradient of `indexSelect`, added into a zeroed gx. */
  indexAdd: "dt_index_add",
  /** `rows` blocks of `rowBytes` from src to dst, each side with its own byte stride. */
  copyBlocks: "dt_copy_blocks",
  /** out = cond ? a : b (bool cond, 4-byte elements), a shorter operand repeating. */
  where: "dt_where",
  /** The gradients of `where` (each output nullable). */
  whereBackward: "dt_where_backward",
  /** Lower (upper = 1: upper) triangles of a batch of matrices, the rest zeroed. */
  tril: "dt_tril",
} as const satisfies Record<string, keyof KernelAbi>;

/** A kernel's name in the seam (`matmulBatched`). */
export type KernelName = keyof typeof kernelSymbols;

/** The C name of a kernel (`dt_matmul_batched`). */
export type KernelSymbol = (typeof kernelSymbols)[KernelName];

/**
 * The kernels of a device, typed by libdtrain's C ABI: each of {@linkcode kernelSymbols} under its
 * seam name, with its C function's prototype.
 */
export type Kernels = { readonly [K in KernelName]: KernelAbi[(typeof kernelSymbols)[K]] };

/** A kernel as a table holds it: native arguments in, a status out. */
export type KernelFunction = (...args: never[]) => number;

/**
 * A device's kernel table from a library exporting libdtrain's kernel prototypes: each kernel is
 * the library's function of its C name, itself (so a call costs one FFI call), or as `wrap` makes
 * it (the cuda device first selects its GPU).
 *
 * @param lib The opened library's functions.
 * @param wrap Makes each table entry from the library's function (absent: the function itself).
 * @returns The table, a plain object with one property per kernel.
 */
export function bindKernels(
  lib: Pick<KernelAbi, KernelSymbol>,
  wrap?: (kernel: KernelFunction) => KernelFunction,
): Kernels {
  // fromEntries, unlike assigning keys one by one, leaves V8 an object with fast properties.
  return Object.fromEntries(
    Object.entries(kernelSymbols).map(([name, symbol]) => {
      const kernel = lib[symbol] as KernelFunction;
      return [name, wrap === undefined ? kernel : wrap(kernel)];
    }),
  ) as unknown as Kernels;
}
