/**
 * The symbol table of `libdtrain.so` (csrc/core): the CPU kernels behind tensors, autograd, the
 * optimizers and data loading, one entry per line under its C prototype, grouped by source file;
 * the ABI enums (csrc/core/dtrain.h) follow it. Every function returning `i32` returns a status
 * (0 = ok); the message of a failure is read with `dt_last_error`.
 * @module
 */

import { openLibrary, type Symbols } from "./load.ts";
import { preferOpenblasCore } from "./openblas_core.ts";

// The FFI's type names, short so that most entries fit on one line under their prototypes.
const ptr = "pointer", buf = "buffer", i32 = "i32", i64 = "i64", u64 = "u64", f32 = "f32";

const symbols = {
  // errors.c: int dt_last_error(char *buf, int64_t len)
  dt_last_error: { parameters: [buf, i64], result: i32 },
  // alloc.c
  // void *dt_alloc(int64_t nbytes, int32_t zero)
  dt_alloc: { parameters: [i64, i32], result: ptr },
  // void dt_free(void *ptr)
  dt_free: { parameters: [ptr], result: "void" },
  // int64_t dt_allocated_bytes(void); int64_t dt_allocated_blocks(void)
  dt_allocated_bytes: { parameters: [], result: i64 },
  dt_allocated_blocks: { parameters: [], result: i64 },
  // OpenBLAS's, found through libdtrain's dependencies; absent with another BLAS.
  // char *openblas_get_corename(void)
  openblas_get_corename: { parameters: [], result: ptr, optional: true },
  // blas.c
  // (const float *a, const float *b, float *c, int64_t m, int64_t n, int64_t k, int32_t trans_a,
  //  int32_t trans_b, int64_t lda, int64_t ldb, int64_t ldc, float alpha, float beta)
  dt_matmul: {
    parameters: [ptr, ptr, ptr, i64, i64, i64, i32, i32, i64, i64, i64, f32, f32],
    result: i32,
  },
  // (const float *a, const float *b, float *c, int64_t batch, int64_t stride_a, int64_t stride_b,
  //  int64_t stride_c, int64_t m, int64_t n, int64_t k, int32_t trans_a, int32_t trans_b,
  //  float alpha, float beta)
  dt_matmul_batched: {
    parameters: [ptr, ptr, ptr, i64, i64, i64, i64, i64, i64, i64, i32, i32, f32, f32],
    result: i32,
  },
  // (const float *x, const float *w, const float *bias (nullable), float *y, int64_t rows,
  //  int64_t in, int64_t out, int32_t w_trans, int64_t ldw)
  dt_linear_forward: { parameters: [ptr, ptr, ptr, ptr, i64, i64, i64, i32, i64], result: i32 },
  // (const float *gy, const float *x, const float *w, float *gx, float *gw, float *gbias (each
  //  output nullable), int64_t rows, int64_t in, int64_t out, int32_t w_trans, int64_t ldw)
  dt_linear_backward: {
    parameters: [ptr, ptr, ptr, ptr, ptr, ptr, i64, i64, i64, i32, i64],
    result: i32,
  },
  // parallel.c: void dt_set_num_threads(int32_t n); int32_t dt_get_num_threads(void)
  dt_set_num_threads: { parameters: [i32], result: "void" },
  dt_get_num_threads: { parameters: [], result: i32 },
  // elementwise.c
  // (float *dst, int64_t n, float value)
  dt_fill_f32: { parameters: [ptr, i64, f32], result: i32 },
  // (int32_t *dst, int64_t n, int32_t value)
  dt_fill_i32: { parameters: [ptr, i64, i32], result: i32 },
  // (void *dst, const void *src, int64_t nbytes)
  dt_copy: { parameters: [ptr, ptr, i64], result: i32 },
  // (const void *src, void *dst, int32_t ndim, const int64_t *shape, const int64_t *strides,
  //  int32_t elem_size)
  dt_copy_strided: { parameters: [ptr, ptr, i32, buf, buf, i32], result: i32 },
  // (const int32_t *src, float *dst, int64_t n)
  dt_cast_i32_f32: { parameters: [ptr, ptr, i64], result: i32 },
  // (const float *src, int32_t *dst, int64_t n)
  dt_cast_f32_i32: { parameters: [ptr, ptr, i64], result: i32 },
  // (int32_t op, const float *a, int64_t na, const float *b, int64_t nb, float *out, int64_t n)
  dt_binary: { parameters: [i32, ptr, i64, ptr, i64, ptr, i64], result: i32 },
  // (int32_t op, const float *a, int64_t na, const float *b, int64_t nb, const float *gy,
  //  int64_t n, float *ga (nullable), float *gb (nullable))
  dt_binary_backward: { parameters: [i32, ptr, i64, ptr, i64, ptr, i64, ptr, ptr], result: i32 },
  // (int32_t op, const float *x, float *y, int64_t n, float p)
  dt_unary: { parameters: [i32, ptr, ptr, i64, f32], result: i32 },
  // (int32_t op, const float *x (nullable), const float *y (nullable), const float *gy,
  //  float *gx, int64_t n, float p)
  dt_unary_backward: { parameters: [i32, ptr, ptr, ptr, ptr, i64, f32], result: i32 },
  // (float *y, const float *x, int64_t n, float alpha)
  dt_axpy: { parameters: [ptr, ptr, i64, f32], result: i32 },
  // reduce.c
  // (const float *x, float *out, int64_t outer, int64_t axis, int64_t inner, float scale)
  dt_sum_axis: { parameters: [ptr, ptr, i64, i64, i64, f32], result: i32 },
  // (const float *gy, float *gx, int64_t outer, int64_t axis, int64_t inner, float scale)
  dt_expand_axis: { parameters: [ptr, ptr, i64, i64, i64, f32], result: i32 },
  // (const float *x, int32_t *out, int64_t rows, int64_t cols)
  dt_argmax_rows: { parameters: [ptr, ptr, i64, i64], result: i32 },
  // nn.c
  // (const float *x, float *y, int64_t rows, int64_t cols, int32_t log)
  dt_softmax: { parameters: [ptr, ptr, i64, i64, i32], result: i32 },
  // (const float *y, const float *gy, float *gx, int64_t rows, int64_t cols, int32_t log)
  dt_softmax_backward: { parameters: [ptr, ptr, ptr, i64, i64, i32], result: i32 },
  // (const float *a, const float *b, int64_t n, float *loss, float *ga)
  dt_mse: { parameters: [ptr, ptr, i64, ptr, ptr], result: i32 },
  // (const float *x, const float *w (nullable), const float *b (nullable), float *y,
  //  float *mean, float *rstd, int64_t rows, int64_t cols, float eps)
  dt_layernorm: { parameters: [ptr, ptr, ptr, ptr, ptr, ptr, i64, i64, f32], result: i32 },
  // (const float *dy, const float *x, const float *w (nullable), const float *mean,
  //  const float *rstd, float *dx (nullable), float *dw, float *db (nullable, accumulated),
  //  int64_t rows, int64_t cols)
  dt_layernorm_backward: {
    parameters: [ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, i64, i64],
    result: i32,
  },
  // (const float *weight, const int32_t *indices, float *y, int64_t n, int64_t num, int64_t dim)
  dt_embedding: { parameters: [ptr, ptr, ptr, i64, i64, i64], result: i32 },
  // (const float *gy, const int32_t *indices, float *gweight, int64_t n, int64_t num,
  //  int64_t dim)
  dt_embedding_backward: { parameters: [ptr, ptr, ptr, i64, i64, i64], result: i32 },
  // (const float *x, float *y, int64_t n, float p, uint64_t seed, uint64_t offset)
  dt_dropout: { parameters: [ptr, ptr, i64, f32, u64, u64], result: i32 },
  // cross_entropy.c
  // (const float *logits, const int32_t *targets, int64_t rows, int64_t cols,
  //  int32_t ignore_index, float label_smoothing, int32_t reduction (0 none, 1 mean, 2 sum),
  //  float *loss (1 float, or rows for none), float *grad (nullable))
  dt_cross_entropy: { parameters: [ptr, ptr, i64, i64, i32, f32, i32, ptr, ptr], result: i32 },
  // (const float *grad, const float *gy, float *gx, int64_t rows, int64_t cols, int32_t per_row)
  dt_cross_entropy_backward: { parameters: [ptr, ptr, ptr, i64, i64, i32], result: i32 },
  // random.c
  // (float *dst, int64_t n, float lo, float hi, uint64_t seed, uint64_t offset)
  dt_rand_uniform: { parameters: [ptr, i64, f32, f32, u64, u64], result: i32 },
  // (float *dst, int64_t n, float mean, float std, uint64_t seed, uint64_t offset)
  dt_randn: { parameters: [ptr, i64, f32, f32, u64, u64], result: i32 },
  // optim.c
  // (float *param, const float *grad, float *momentum_buf (nullable), int64_t n, float lr,
  //  float momentum, float dampening, int32_t nesterov, float weight_decay, int32_t first)
  dt_sgd_step: { parameters: [ptr, ptr, ptr, i64, f32, f32, f32, i32, f32, i32], result: i32 },
  // (float *param, const float *grad, float *exp_avg, float *exp_avg_sq, int64_t n, float lr,
  //  float beta1, float beta2, float eps, float weight_decay, int64_t step)
  dt_adamw_step: {
    parameters: [ptr, ptr, ptr, ptr, i64, f32, f32, f32, f32, f32, i64],
    result: i32,
  },
  // data.c
  // (const uint8_t *src, int64_t src_rows, const int32_t *indices, int64_t n, int64_t row_len,
  //  float scale, float shift, float *dst)
  dt_gather_u8_f32: { parameters: [ptr, i64, ptr, i64, i64, f32, f32, ptr], result: i32 },
  // (const void *src, int64_t src_rows, const int32_t *indices, int64_t n, int64_t row_bytes,
  //  void *dst)
  dt_gather_rows: { parameters: [ptr, i64, ptr, i64, i64, ptr], result: i32 },
  // (const uint8_t *src, int64_t src_len, const int32_t *indices, int64_t n, int32_t *dst)
  dt_gather_u8_i32: { parameters: [ptr, i64, ptr, i64, ptr], result: i32 },
  // attention.c (q, k, v and out strided as `layout` says: see csrc/core/attention.c)
  // (const float *q [bh, tq, d], const float *k [bh, tk, d], const float *v [bh, tk, dv],
  //  const float *mask (additive, nullable), float *out [bh, tq, dv], float *lse [bh, tq],
  //  const int64_t *layout, int64_t bh, int64_t heads, int64_t tq, int64_t tk, int64_t d,
  //  int64_t dv, float scale, int32_t causal, float dropout_p, uint64_t seed, uint64_t offset)
  // deno-fmt-ignore
  dt_attention_forward: { parameters: [ptr, ptr, ptr, ptr, ptr, ptr,
    buf, i64, i64, i64, i64, i64, i64, f32, i32, f32, u64, u64], result: i32 },
  // (const float *q, const float *k, const float *v, const float *mask (nullable),
  //  const float *out, const float *lse, const float *gout, float *gq, float *gk, float *gv,
  //  then as dt_attention_forward from `layout` on)
  // deno-fmt-ignore
  dt_attention_backward: { parameters: [ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr, ptr,
    buf, i64, i64, i64, i64, i64, i64, f32, i32, f32, u64, u64], result: i32 },
  // slice.c
  // (const void *src (contiguous), void *dst (the view's first element), int32_t ndim,
  //  const int64_t *shape, const int64_t *strides (of dst), int32_t elem_size)
  dt_copy_to_strided: { parameters: [ptr, ptr, i32, buf, buf, i32], result: i32 },
  // minmax.c
  // (const float *x, float *y, int64_t n, float lo, float hi)
  dt_clamp: { parameters: [ptr, ptr, i64, f32, f32], result: i32 },
  // (const float *x, const float *gy, float *gx, int64_t n, float lo, float hi)
  dt_clamp_backward: { parameters: [ptr, ptr, ptr, i64, f32, f32], result: i32 },
  // (const float *x, float *y, int64_t n)
  dt_abs: { parameters: [ptr, ptr, i64], result: i32 },
  // (const float *x, const float *gy, float *gx, int64_t n)
  dt_abs_backward: { parameters: [ptr, ptr, ptr, i64], result: i32 },
  // (const float *a, const float *b, float *out, int64_t n, int32_t is_min)
  dt_maximum: { parameters: [ptr, ptr, ptr, i64, i32], result: i32 },
  // (const float *a, const float *b, const float *gy, float *ga (nullable), float *gb (nullable),
  //  int64_t n, int32_t is_min)
  dt_maximum_backward: { parameters: [ptr, ptr, ptr, ptr, ptr, i64, i32], result: i32 },
  // (const float *x, float *values, int32_t *indices, int64_t rows, int64_t cols, int32_t is_min)
  dt_max_rows: { parameters: [ptr, ptr, ptr, i64, i64, i32], result: i32 },
  // (const float *gy, const int32_t *indices, float *gx, int64_t rows, int64_t cols)
  dt_index_rows_backward: { parameters: [ptr, ptr, ptr, i64, i64], result: i32 },
  // (const float *x, const float *value, const float *gy, float *gx, int64_t n)
  dt_extreme_backward: { parameters: [ptr, ptr, ptr, ptr, i64], result: i32 },
  // compare.c: the bool and i32 dtypes (dtype codes: DTypeCode below)
  // (int32_t op, int32_t dtype, const void *a, int64_t na, const void *b, int64_t nb,
  //  uint8_t *out, int64_t n)
  dt_compare: { parameters: [i32, i32, ptr, i64, ptr, i64, ptr, i64], result: i32 },
  // (const void *src, int32_t src_dtype, void *dst, int32_t dst_dtype, int64_t n)
  dt_cast: { parameters: [ptr, i32, ptr, i32, i64], result: i32 },
  // (uint8_t *dst, int64_t n, int32_t value)
  dt_fill_u8: { parameters: [ptr, i64, i32], result: i32 },
  // (const void *x, int32_t dtype, int32_t *out, int64_t outer, int64_t axis, int64_t inner)
  dt_sum_axis_int: { parameters: [ptr, i32, ptr, i64, i64, i64], result: i32 },
  // (int32_t op, const int32_t *a, int64_t na, const int32_t *b, int64_t nb, int32_t *out,
  //  int64_t n)
  dt_binary_i32: { parameters: [i32, ptr, i64, ptr, i64, ptr, i64], result: i32 },
  // (const float *x, float *y, int64_t n, float lo, float hi)
  dt_clamp_range: { parameters: [ptr, ptr, i64, f32, f32], result: i32 },
  // indexing.c
  // (const void *x, const int64_t *xshape, const int32_t *index, const int64_t *ishape,
  //  int32_t ndim, int32_t dim, void *out)
  dt_gather: { parameters: [ptr, buf, ptr, buf, i32, i32, ptr], result: i32 },
  // (const float *gy, const int64_t *xshape, const int32_t *index, const int64_t *ishape,
  //  int32_t ndim, int32_t dim, float *gx)
  dt_scatter_add: { parameters: [ptr, buf, ptr, buf, i32, i32, ptr], result: i32 },
  // (const void *x, const int32_t *index, int64_t nindex, void *out, int64_t outer,
  //  int64_t axis, int64_t inner)
  dt_index_select: { parameters: [ptr, ptr, i64, ptr, i64, i64, i64], result: i32 },
  // (const float *gy, const int32_t *index, int64_t nindex, float *gx, int64_t outer,
  //  int64_t axis, int64_t inner)
  dt_index_add: { parameters: [ptr, ptr, i64, ptr, i64, i64, i64], result: i32 },
  // (const void *src, void *dst, int64_t rows, int64_t row_bytes, int64_t src_stride,
  //  int64_t dst_stride)
  dt_copy_blocks: { parameters: [ptr, ptr, i64, i64, i64, i64], result: i32 },
  // (const uint8_t *cond, int64_t nc, const void *a, int64_t na, const void *b, int64_t nb,
  //  void *out, int64_t n)
  dt_where: { parameters: [ptr, i64, ptr, i64, ptr, i64, ptr, i64], result: i32 },
  // (const uint8_t *cond, int64_t nc, const float *gy, float *ga, float *gb, int64_t n)
  dt_where_backward: { parameters: [ptr, i64, ptr, ptr, ptr, i64], result: i32 },
  // (const void *x, void *out, int64_t batch, int64_t rows, int64_t cols, int64_t diagonal,
  //  int32_t upper)
  dt_tril: { parameters: [ptr, ptr, i64, i64, i64, i64, i32], result: i32 },
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

/** Status codes returned by the native functions (csrc/core/dtrain.h). */
export const Status = { OK: 0, EINVAL: 1, ENOMEM: 2, EUNSUPPORTED: 3 } as const;

/** Elementwise binary ops (enum dt_binary_op). */
export const BinaryOp = { add: 0, sub: 1, mul: 2, div: 3 } as const;

/** Elementwise unary ops (enum dt_unary_op). */
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

/** Comparisons (enum dt_compare_op in csrc/core/compare.c). */
export const CompareOp = { eq: 0, ne: 1, lt: 2, le: 3, gt: 4, ge: 5 } as const;

/** Element types as the kernels number them (enum dt_dtype in csrc/core/compare.c). */
export const DTypeCode = { f32: 0, i32: 1, bool: 2 } as const;

/** The symbol table itself: libdtrain_cuda.so exports the same kernels (ffi/cuda.ts shares it). */
export { symbols as dtrainSymbols };
