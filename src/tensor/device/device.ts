/**
 * The device seam: what a device (cpu today, cuda later) gives the layers above it. Ops,
 * optimizers and data loaders reach memory and kernels only through a {@linkcode DeviceBackend};
 * only the files of this folder call a native library.
 *
 * [Note: device seam]
 * A device is an allocator (tinygrad's `_alloc`/`_free`/`_copyin`/`_copyout`) plus a kernel
 * table. Memory is addressed by device pointers: on cpu they are host addresses, on a GPU they
 * are device addresses that JavaScript never dereferences. Kernels take those pointers and plain
 * numbers, in the argument order of libdtrain's C ABI (csrc/core/dtrain.h, ffi/dtrain.ts), and
 * return a status (`Status` in ffi/dtrain.ts) that the caller passes to `check`. The cpu table
 * holds the FFI functions themselves, so a kernel call costs what a direct `lib.dt_*` call cost.
 * Devices are found by name in registry.ts; a new one is a file beside cpu.ts exporting a
 * {@linkcode DeviceFactory}, plus its entry in the registry's built-in table (or a
 * `registerDevice` call at run time, as tests/tensor/device_test.ts does). No op changes: ops
 * allocate their outputs on their inputs' device and call that device's kernels.
 * @module
 */

import type { DtrainSymbols } from "../../../ffi/dtrain.ts";

// The kernel ABI's enums, for the layers above the seam (which never import ffi/ themselves).
export { BinaryOp, CompareOp, DTypeCode, Status, UnaryOp } from "../../../ffi/dtrain.ts";

/** An address in a device's memory (a host address on cpu). */
export type DevicePtr = Deno.PointerValue;

/**
 * A block from `DeviceBackend.alloc`. `owner` is set when the JavaScript heap owns the memory (cpu's
 * ArrayBuffers, see [Note: cpu memory is JavaScript memory] in cpu.ts): the block lives exactly as
 * long as `owner` is reachable, so whoever uses `ptr` keeps `owner` reachable. Without an owner
 * the block lives until `free`.
 */
export interface DeviceBlock {
  /** The block's address. */
  readonly ptr: DevicePtr;
  /** The object whose lifetime is the block's, if the garbage collector frees it. */
  readonly owner?: object;
  /** Frees a block the device did not allocate (adopted by a Storage), instead of `free`. */
  readonly release?: () => void;
}

/** libdtrain's functions, by C name: the prototypes every device's kernels follow. */
export type KernelAbi = DtrainSymbols;

/**
 * The kernels of a device, typed by libdtrain's C ABI (the prototypes are in ffi/dtrain.ts): a
 * device whose native library exports the same prototypes fills the table with its functions.
 * Every kernel returns a native status (0 = OK) for `DeviceBackend.check`; pointers are device
 * pointers, except where ffi/dtrain.ts says host (the gathers' sources and indices, the strided
 * copy's shape). Op codes are the ABI enums of ffi/dtrain.ts.
 */
export interface Kernels {
  /** c = alpha * op(a) @ op(b) + beta * c (sgemm; `trans*` 0 or 1, leading dimensions `ld*`). */
  matmul: KernelAbi["dt_matmul"];
  /** `batch` products of contiguous matrices `stride*` elements apart. */
  matmulBatched: KernelAbi["dt_matmul_batched"];
  /** y = x @ op(w) + bias (bias nullable) for `rows` rows. */
  linearForward: KernelAbi["dt_linear_forward"];
  /** The gradients of `linearForward` (each output nullable). */
  linearBackward: KernelAbi["dt_linear_backward"];
  /** Sets `n` f32 elements to `value`. */
  fillF32: KernelAbi["dt_fill_f32"];
  /** Sets `n` i32 elements to `value`. */
  fillI32: KernelAbi["dt_fill_i32"];
  /** Copies a strided view into contiguous memory (`shape`, `strides` in host memory). */
  copyStrided: KernelAbi["dt_copy_strided"];
  /** i32 to f32, `n` elements. */
  castI32F32: KernelAbi["dt_cast_i32_f32"];
  /** f32 to i32 (toward zero), `n` elements. */
  castF32I32: KernelAbi["dt_cast_f32_i32"];
  /** out = a op b, b or a repeating when shorter (`BinaryOp`). */
  binary: KernelAbi["dt_binary"];
  /** The gradients of `binary` (each output nullable). */
  binaryBackward: KernelAbi["dt_binary_backward"];
  /** y = op(x, p) (`UnaryOp`). */
  unary: KernelAbi["dt_unary"];
  /** The gradient of `unary`, reading x or y as the op needs (the other nullable). */
  unaryBackward: KernelAbi["dt_unary_backward"];
  /** y += alpha * x. */
  axpy: KernelAbi["dt_axpy"];
  /** out[o, i] = scale * sum over a of x[o, a, i]. */
  sumAxis: KernelAbi["dt_sum_axis"];
  /** The gradient of `sumAxis`: gy broadcast back over the axis, times scale. */
  expandAxis: KernelAbi["dt_expand_axis"];
  /** The i32 index of each row's maximum. */
  argmaxRows: KernelAbi["dt_argmax_rows"];
  /** Softmax (log = 1: log-softmax) over rows. */
  softmax: KernelAbi["dt_softmax"];
  /** The gradient of `softmax` from its output. */
  softmaxBackward: KernelAbi["dt_softmax_backward"];
  /** Cross-entropy (reduction, smoothing) into `loss`, and its gradient into `grad` (nullable). */
  crossEntropy: KernelAbi["dt_cross_entropy"];
  /** Mean squared error into `loss`, and d loss / d a into `ga` (nullable). */
  mse: KernelAbi["dt_mse"];
  /** Layer norm over rows, saving mean and 1/std (w, b nullable). */
  layernorm: KernelAbi["dt_layernorm"];
  /** The gradients of `layernorm` (dw, db accumulated; outputs nullable). */
  layernormBackward: KernelAbi["dt_layernorm_backward"];
  /** Rows of `weight` picked by i32 `indices`. */
  embedding: KernelAbi["dt_embedding"];
  /** The gradient of `embedding`, accumulated into `gweight`. */
  embeddingBackward: KernelAbi["dt_embedding_backward"];
  /** Dropout with the counter RNG at (seed, offset); the same call recomputes the mask. */
  dropout: KernelAbi["dt_dropout"];
  /** U[lo, hi) samples from counters offset.. of `seed`. */
  randUniform: KernelAbi["dt_rand_uniform"];
  /** N(mean, std²) samples from counters offset.. of `seed` (two per element). */
  randn: KernelAbi["dt_randn"];
  /** One fused SGD update (momentumBuf nullable; first = 1 seeds it). */
  sgdStep: KernelAbi["dt_sgd_step"];
  /** One fused AdamW update at step `step` (1-based). */
  adamwStep: KernelAbi["dt_adamw_step"];
  /** dst rows = (host u8 src rows at host i32 `indices`) * scale + shift. */
  gatherU8F32: KernelAbi["dt_gather_u8_f32"];
  /** dst rows = src rows at host i32 `indices` (`rowBytes` each). */
  gatherRows: KernelAbi["dt_gather_rows"];
  /** dst = host u8 src at host i32 `indices`, as i32. */
  gatherU8I32: KernelAbi["dt_gather_u8_i32"];
  /** Fused attention forward over [bh, t, d] blocks, saving each query row's log-sum-exp. */
  attentionForward: KernelAbi["dt_attention_forward"];
  /** The gradients of `attentionForward`, recomputing the probabilities from the log-sum-exp. */
  attentionBackward: KernelAbi["dt_attention_backward"];
  /** Scatters contiguous memory into a strided view (`shape`, `strides` in host memory). */
  copyToStrided: KernelAbi["dt_copy_to_strided"];
  // ---- ops: order, reductions, losses ----
  /** y = min(max(x, lo), hi). */
  clamp: KernelAbi["dt_clamp"];
  /** The gradient of `clamp`: gy where lo <= x <= hi. */
  clampBackward: KernelAbi["dt_clamp_backward"];
  /** y = |x|. */
  abs: KernelAbi["dt_abs"];
  /** The gradient of `abs`: sign(x) * gy. */
  absBackward: KernelAbi["dt_abs_backward"];
  /** Elementwise maximum (is_min = 1: minimum) of equal-shaped operands. */
  maximum: KernelAbi["dt_maximum"];
  /** The gradients of `maximum`, halved on ties (outputs nullable). */
  maximumBackward: KernelAbi["dt_maximum_backward"];
  /** Each row's largest (smallest) value and its i32 index (indices nullable). */
  maxRows: KernelAbi["dt_max_rows"];
  /** gy scattered to each row's index, zeros elsewhere. */
  indexRowsBackward: KernelAbi["dt_index_rows_backward"];
  /** gy shared evenly between the elements equal to `value`. */
  extremeBackward: KernelAbi["dt_extreme_backward"];
  /** The gradient of `crossEntropy` from its saved `grad` and gy (one value, or one per row). */
  crossEntropyBackward: KernelAbi["dt_cross_entropy_backward"];
  // ---- end ops ----
  // compare.c and indexing.c: the bool and i32 dtypes, and indexing.
  /** out (bool) = a op b (`CompareOp`), both of one dtype (`DTypeCode`), b or a repeating. */
  compare: KernelAbi["dt_compare"];
  /** Converts between dtypes (`DTypeCode`), one side at least bool. */
  cast: KernelAbi["dt_cast"];
  /** Sets `n` bool elements to `value` (non-zero is true). */
  fillU8: KernelAbi["dt_fill_u8"];
  /** out[o, i] (i32) = sum over a of i32 or bool x[o, a, i]. */
  sumAxisInt: KernelAbi["dt_sum_axis_int"];
  /** out = a op b on i32 (`BinaryOp`; div is floor division). */
  binaryI32: KernelAbi["dt_binary_i32"];
  /** y = min(max(x, lo), hi) on f32. */
  clampRange: KernelAbi["dt_clamp_range"];
  /** out = x gathered along `dim` at i32 `index` (shapes in host memory). */
  gather: KernelAbi["dt_gather"];
  /** The gradient of `gather`, added into a zeroed gx. */
  scatterAdd: KernelAbi["dt_scatter_add"];
  /** out[o, j, :] = x[o, index[j], :]. */
  indexSelect: KernelAbi["dt_index_select"];
  /** The gradient of `indexSelect`, added into a zeroed gx. */
  indexAdd: KernelAbi["dt_index_add"];
  /** `rows` blocks of `rowBytes` from src to dst, each side with its own byte stride. */
  copyBlocks: KernelAbi["dt_copy_blocks"];
  /** out = cond ? a : b (bool cond, 4-byte elements), a shorter operand repeating. */
  where: KernelAbi["dt_where"];
  /** The gradients of `where` (each output nullable). */
  whereBackward: KernelAbi["dt_where_backward"];
  /** Lower (upper = 1: upper) triangles of a batch of matrices, the rest zeroed. */
  tril: KernelAbi["dt_tril"];
}

/** One device: its allocator, copies and kernels (see [Note: device seam]). */
export interface DeviceBackend {
  /** The full name tensors report (`"cpu"`, `"cuda:0"`). */
  readonly name: string;
  /**
   * Whether this device's pointers are host addresses that JavaScript and host libraries (Gloo,
   * shared memory, files) may read and write directly: true for cpu, false for a GPU.
   */
  readonly isHostMemory: boolean;
  /** The kernel table. */
  readonly kernels: Kernels;
  /**
   * Allocates `nbytes` (zero-filled when `zero`).
   * @throws NativeError with `Status.ENOMEM` when the device is out of memory.
   */
  alloc(nbytes: number, zero: boolean): DeviceBlock;
  /** Frees a block from `alloc` now (an owned block too: it need not wait for a collection). */
  free(block: DeviceBlock): void;
  /**
   * Bytes this device's allocator holds now (blocks it borrows elsewhere are counted there). Owned
   * blocks that were garbage collected may still count until their finalizer runs.
   */
  allocatedBytes(): number;
  /** Copies `nbytes` from host memory into device memory. */
  copyIn(dst: DevicePtr, hostSrc: DevicePtr, nbytes: number): void;
  /** Copies `nbytes` from device memory into host memory. */
  copyOut(hostDst: DevicePtr, src: DevicePtr, nbytes: number): void;
  /** Copies `nbytes` between two blocks of this device. */
  copy(dst: DevicePtr, src: DevicePtr, nbytes: number): void;
  /** Throws the device's error for a kernel's status unless it is OK. */
  check(status: number): void;
}

/** Makes the device for an index (`cuda:1` asks the "cuda" factory for index 1; cpu gets 0). */
export type DeviceFactory = (index: number) => DeviceBackend;
