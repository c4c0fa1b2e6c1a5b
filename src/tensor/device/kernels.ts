/**
 * The kernels of the device seam, derived from libdtrain's FFI table (ffi/dtrain.ts) by name: a
 * kernel's seam name is its C name camelCased (`dt_matmul_batched` is `matmulBatched`), and every
 * function of the table is a kernel except the runtime's own (errors, the allocator, the thread
 * pool, file mappings: {@linkcode RUNTIME_SYMBOLS}). Every device builds its table with
 * {@linkcode bindKernels}: the cpu device from libdtrain, the cuda device from libdtrain_cuda,
 * which exports the same prototypes (csrc/core/dtrain.h). A new kernel is its line in
 * ffi/dtrain.ts and its documented member in {@linkcode Kernels}; the compiler checks that the two
 * name the same kernels.
 * @module
 */

import type { DtrainSymbols } from "../../../ffi/dtrain.ts";
import { dtrainSymbols } from "../../../ffi/dtrain.ts";

/** libdtrain's functions, by C name: the prototypes every device's kernels follow. */
export type KernelAbi = DtrainSymbols;

/** libdtrain's functions that are the runtime's, not kernels: a device calls them itself. */
export const RUNTIME_SYMBOLS = [
  "dt_last_error",
  "dt_alloc",
  "dt_free",
  "dt_allocated_bytes",
  "dt_allocated_blocks",
  "openblas_get_corename",
  "dt_set_num_threads",
  "dt_get_num_threads",
  "dt_copy",
  "dt_matmul_bf16_backend",
  "dt_map_file",
  "dt_unmap_file",
] as const satisfies readonly (keyof KernelAbi)[];

/** The C name of a kernel (`dt_matmul_batched`). */
export type KernelSymbol = Exclude<keyof KernelAbi, (typeof RUNTIME_SYMBOLS)[number]>;

/** `matmul_batched` as `matmulBatched` (type-level; the words of a C name, camelCased). */
export type CamelCase<S extends string> = S extends `${infer Head}_${infer Tail}`
  ? `${Head}${Capitalize<CamelCase<Tail>>}`
  : S;

/** A kernel's seam name from its C name: `dt_matmul_batched` is `matmulBatched`. */
export type SeamName<C extends string> = C extends `dt_${infer Rest}` ? CamelCase<Rest> : never;

/** A kernel's name in the seam (`matmulBatched`). */
export type KernelName = SeamName<KernelSymbol>;

/** The C name whose seam name is `N`. */
export type KernelSymbolOf<N extends KernelName> = {
  [C in KernelSymbol]: SeamName<C> extends N ? C : never;
}[KernelSymbol];

/** The C function whose seam name is `N`. */
export type KernelOf<N extends KernelName> = KernelAbi[KernelSymbolOf<N>];

/**
 * The kernels of a device, typed by libdtrain's C ABI, each under its seam name with what it does.
 * Every kernel returns a native status (0 = OK) for `DeviceBackend.check`, except `unaryReads`,
 * which answers a question; pointers are device pointers, except where the comment says host (the
 * gathers' sources and indices, the strided copies' shapes). Op codes are the ABI enums of
 * ffi/dtrain.ts.
 */
export interface Kernels {
  /** c = alpha * op(a) @ op(b) + beta * c (sgemm; `trans*` 0 or 1, leading dimensions `ld*`). */
  readonly matmul: KernelOf<"matmul">;
  /** `batch` products of contiguous matrices `stride*` elements apart. */
  readonly matmulBatched: KernelOf<"matmulBatched">;
  /** y = x @ op(w) + bias (bias nullable) for `rows` rows. */
  readonly linearForward: KernelOf<"linearForward">;
  /** The gradients of `linearForward` (each output nullable). */
  readonly linearBackward: KernelOf<"linearBackward">;
  /**
   * c = alpha * op(a) @ op(b) + beta * c for `batch` products `stride*` elements apart, bf16 a and
   * b, f32 c (`trans*`, `ld*` as `matmul`'s). On the CPU, oneDNN or f32 sgemm of the bf16 values,
   * as `bf16MatmulBackend()` (src/tensor/device/bf16_gemm.ts) reports.
   */
  readonly matmulBf16: KernelOf<"matmulBf16">;
  /** Sets `n` f32 elements to `value`. */
  readonly fillF32: KernelOf<"fillF32">;
  /** Sets `n` i32 elements to `value`. */
  readonly fillI32: KernelOf<"fillI32">;
  /** Copies a strided view into contiguous memory (`shape`, `strides` in host memory). */
  readonly copyStrided: KernelOf<"copyStrided">;
  /** i32 to f32, `n` elements. */
  readonly castI32F32: KernelOf<"castI32F32">;
  /** f32 to i32 (toward zero), `n` elements. */
  readonly castF32I32: KernelOf<"castF32I32">;
  /** u16 (token storage) to i32, `n` elements. */
  readonly castU16I32: KernelOf<"castU16I32">;
  /** f32 to bf16 or f16 (`DTypeCode`), round to nearest even, PyTorch's bits (csrc/core/half.c). */
  readonly castF32Half: KernelOf<"castF32Half">;
  /** bf16 or f16 (`DTypeCode`) to f32, exact. */
  readonly castHalfF32: KernelOf<"castHalfF32">;
  /** out = a op b, b or a repeating when shorter (`BinaryOp`). */
  readonly binary: KernelOf<"binary">;
  /** The gradients of `binary` (each output nullable). */
  readonly binaryBackward: KernelOf<"binaryBackward">;
  /** y = op(x, p) (`UnaryOp`). */
  readonly unary: KernelOf<"unary">;
  /** The gradient of `unary`, reading x or y as the op needs (the other nullable). */
  readonly unaryBackward: KernelOf<"unaryBackward">;
  /**
   * What `unaryBackward` reads for an op: 0 nothing, 1 x, 2 y (-1: unknown op). An answer, not a
   * status: the native header says it once (csrc/core/scalar_math.h), and autograd asks it.
   */
  readonly unaryReads: KernelOf<"unaryReads">;
  /** y += alpha * x. */
  readonly axpy: KernelOf<"axpy">;
  /** out[o, i] = scale * sum over a of x[o, a, i]. */
  readonly sumAxis: KernelOf<"sumAxis">;
  /** The gradient of `sumAxis`: gy broadcast back over the axis, times scale. */
  readonly expandAxis: KernelOf<"expandAxis">;
  /** The i32 index of each row's maximum. */
  readonly argmaxRows: KernelOf<"argmaxRows">;
  /** out[0] = the sum of x[i] * x[i] over `n` elements (a squared L2 norm, no temporary). */
  readonly sumSquares: KernelOf<"sumSquares">;
  /** Softmax (log = 1: log-softmax) over rows. */
  readonly softmax: KernelOf<"softmax">;
  /** The gradient of `softmax` from its output. */
  readonly softmaxBackward: KernelOf<"softmaxBackward">;
  /** Cross-entropy (reduction, smoothing) into `loss`, and its gradient into `grad` (nullable). */
  readonly crossEntropy: KernelOf<"crossEntropy">;
  /** Mean squared error into `loss`, and d loss / d a into `ga` (nullable). */
  readonly mse: KernelOf<"mse">;
  /** Layer norm over rows, saving mean and 1/std (w, b nullable). */
  readonly layernorm: KernelOf<"layernorm">;
  /** The gradients of `layernorm` (dw, db accumulated; outputs nullable). */
  readonly layernormBackward: KernelOf<"layernormBackward">;
  /** Rows of `weight` picked by i32 `indices`. */
  readonly embedding: KernelOf<"embedding">;
  /** The gradient of `embedding`, accumulated into `gweight`. */
  readonly embeddingBackward: KernelOf<"embeddingBackward">;
  /** Dropout with the counter RNG at (seed, offset); the same call recomputes the mask. */
  readonly dropout: KernelOf<"dropout">;
  /** U[lo, hi) samples from counters offset.. of `seed`. */
  readonly randUniform: KernelOf<"randUniform">;
  /** N(mean, std²) samples from counters offset.. of `seed` (two per element). */
  readonly randn: KernelOf<"randn">;
  /** Integers uniform in [low, high) (int32 range) from counters offset.. of `seed`, one each. */
  readonly randint: KernelOf<"randint">;
  /** One fused SGD update (momentumBuf nullable; first = 1 seeds it). */
  readonly sgdStep: KernelOf<"sgdStep">;
  /** One fused AdamW update at step `step` (1-based). */
  readonly adamwStep: KernelOf<"adamwStep">;
  /** dst rows = (host u8 src rows at host i32 `indices`) * scale + shift. */
  readonly gatherU8F32: KernelOf<"gatherU8F32">;
  /** dst rows = src rows at host i32 `indices` (`rowBytes` each). */
  readonly gatherRows: KernelOf<"gatherRows">;
  /** dst = host u8 src at host i32 `indices`, as i32. */
  readonly gatherU8I32: KernelOf<"gatherU8I32">;
  /** Fused attention forward over [bh, t, d] blocks, saving each query row's log-sum-exp. */
  readonly attentionForward: KernelOf<"attentionForward">;
  /** The gradients of `attentionForward`, recomputing the probabilities from the log-sum-exp. */
  readonly attentionBackward: KernelOf<"attentionBackward">;
  /** Scatters contiguous memory into a strided view (`shape`, `strides` in host memory). */
  readonly copyToStrided: KernelOf<"copyToStrided">;
  /** y = min(max(x, lo), hi). */
  readonly clamp: KernelOf<"clamp">;
  /** The gradient of `clamp`: gy where lo <= x <= hi. */
  readonly clampBackward: KernelOf<"clampBackward">;
  /** y = |x|. */
  readonly abs: KernelOf<"abs">;
  /** The gradient of `abs`: sign(x) * gy. */
  readonly absBackward: KernelOf<"absBackward">;
  /** Elementwise maximum (is_min = 1: minimum) of equal-shaped operands. */
  readonly maximum: KernelOf<"maximum">;
  /** The gradients of `maximum`, halved on ties (outputs nullable). */
  readonly maximumBackward: KernelOf<"maximumBackward">;
  /** Each row's largest (smallest) value and its i32 index (indices nullable). */
  readonly maxRows: KernelOf<"maxRows">;
  /** gy scattered to each row's index, zeros elsewhere. */
  readonly indexRowsBackward: KernelOf<"indexRowsBackward">;
  /** gy shared evenly between the elements equal to `value`. */
  readonly extremeBackward: KernelOf<"extremeBackward">;
  /** The gradient of `crossEntropy` from its saved `grad` and gy (one value, or one per row). */
  readonly crossEntropyBackward: KernelOf<"crossEntropyBackward">;
  /** out (bool) = a op b (`CompareOp`), both of one dtype (`DTypeCode`), b or a repeating. */
  readonly compare: KernelOf<"compare">;
  /** Converts between dtypes (`DTypeCode`), one side at least bool. */
  readonly cast: KernelOf<"cast">;
  /** Sets `n` bool elements to `value` (non-zero is true). */
  readonly fillU8: KernelOf<"fillU8">;
  /** out[o, i] (i32) = sum over a of i32 or bool x[o, a, i]. */
  readonly sumAxisInt: KernelOf<"sumAxisInt">;
  /** out = a op b on i32 (`BinaryOp`; div is floor division). */
  readonly binaryI32: KernelOf<"binaryI32">;
  /** y = min(max(x, lo), hi) on f32. */
  readonly clampRange: KernelOf<"clampRange">;
  /** out = x gathered along `dim` at i32 `index` (shapes in host memory). */
  readonly gather: KernelOf<"gather">;
  /** The gradient of `gather`, added into a zeroed gx. */
  readonly scatterAdd: KernelOf<"scatterAdd">;
  /** out[o, j, :] = x[o, index[j], :]. */
  readonly indexSelect: KernelOf<"indexSelect">;
  /** The gradient of `indexSelect`, added into a zeroed gx. */
  readonly indexAdd: KernelOf<"indexAdd">;
  /** `rows` blocks of `rowBytes` from src to dst, each side with its own byte stride. */
  readonly copyBlocks: KernelOf<"copyBlocks">;
  /** out = cond ? a : b (bool cond, 4-byte elements), a shorter operand repeating. */
  readonly where: KernelOf<"where">;
  /** The gradients of `where` (each output nullable). */
  readonly whereBackward: KernelOf<"whereBackward">;
  /** Lower (upper = 1: upper) triangles of a batch of matrices, the rest zeroed. */
  readonly tril: KernelOf<"tril">;
}

// Kernels names each kernel of the FFI table, and nothing else: a kernel added to ffi/dtrain.ts
// and not documented here, or the other way round, is a type error on one of these two lines.
const everyKernelDocumented: Record<KernelName, unknown> = {} as Kernels;
const nothingElse: Record<keyof Kernels, unknown> = {} as Record<KernelName, unknown>;
void everyKernelDocumented, void nothingElse;

/**
 * `dt_gather_u8_f32` as `gatherU8F32`: the seam name of a C name, as {@linkcode KernelName}
 * derives it for the type.
 */
function seamName(symbol: string): string {
  const [, first, ...rest] = symbol.split("_");
  return first + rest.map((word) => word[0].toUpperCase() + word.slice(1)).join("");
}

const runtime: readonly string[] = RUNTIME_SYMBOLS;

/** Each kernel's seam name and C name, derived from ffi/dtrain.ts's table. */
export const kernelSymbols: { readonly [N in KernelName]: KernelSymbol } = Object.fromEntries(
  Object.keys(dtrainSymbols)
    .filter((symbol) => !runtime.includes(symbol))
    .map((symbol) => [seamName(symbol), symbol]),
) as { readonly [N in KernelName]: KernelSymbol };

/** A kernel as a table holds it: native arguments in, a status out. */
export type KernelFunction = (...args: never[]) => number;

/**
 * A device's kernel table from a library exporting libdtrain's kernel prototypes: each kernel is
 * the library's function of its C name, itself (so a call costs one FFI call), or as `wrap` makes
 * it (the cuda device first selects its GPU).
 *
 * @param lib The opened library's functions.
 * @param wrap Makes each table entry from the library's function and its C name (absent: the
 *   function itself).
 * @returns The table, a plain object with one property per kernel.
 */
export function bindKernels(
  lib: Pick<KernelAbi, KernelSymbol>,
  wrap?: (kernel: KernelFunction, symbol: KernelSymbol) => KernelFunction,
): Kernels {
  // fromEntries, unlike assigning keys one by one, leaves V8 an object with fast properties.
  return Object.fromEntries(
    Object.entries(kernelSymbols).map(([name, symbol]) => {
      const kernel = lib[symbol] as KernelFunction;
      return [name, wrap === undefined ? kernel : wrap(kernel, symbol)];
    }),
  ) as unknown as Kernels;
}
