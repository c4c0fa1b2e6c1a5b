/**
 * The second half of `libdtrain.so`'s symbol table (ffi/dtrain.ts joins the halves): attention,
 * strided writes, order and reduction ops, losses, comparisons and indexing. Each entry carries
 * its C prototype.
 * @module
 */

/** Symbols of csrc/core's transformer-era kernels. */
export const opsSymbols = {
  // attention.c
  dt_attention_forward: {
    parameters: [
      "pointer", // const float *q   [bh, tq, d] (strided: layout)
      "pointer", // const float *k   [bh, tk, d]
      "pointer", // const float *v   [bh, tk, dv]
      "pointer", // const float *mask (additive, nullable)
      "pointer", // float *out  [bh, tq, dv]
      "pointer", // float *lse  [bh, tq] (contiguous)
      "buffer", // const int64_t *layout (strides: see csrc/core/attention.c)
      "i64", // int64_t bh
      "i64", // int64_t heads
      "i64", // int64_t tq
      "i64", // int64_t tk
      "i64", // int64_t d
      "i64", // int64_t dv
      "f32", // float scale
      "i32", // int32_t causal
      "f32", // float dropout_p
      "u64", // uint64_t seed
      "u64", // uint64_t offset
    ],
    result: "i32",
  },
  dt_attention_backward: {
    parameters: [
      "pointer", // const float *q
      "pointer", // const float *k
      "pointer", // const float *v
      "pointer", // const float *mask (nullable)
      "pointer", // const float *out
      "pointer", // const float *lse
      "pointer", // const float *gout
      "pointer", // float *gq
      "pointer", // float *gk
      "pointer", // float *gv
      "buffer", // const int64_t *layout
      "i64", // int64_t bh
      "i64", // int64_t heads
      "i64", // int64_t tq
      "i64", // int64_t tk
      "i64", // int64_t d
      "i64", // int64_t dv
      "f32", // float scale
      "i32", // int32_t causal
      "f32", // float dropout_p
      "u64", // uint64_t seed
      "u64", // uint64_t offset
    ],
    result: "i32",
  },
  // slice.c
  dt_copy_to_strided: {
    parameters: [
      "pointer", // const void *src (contiguous)
      "pointer", // void *dst (the view's first element)
      "i32", // int32_t ndim
      "buffer", // const int64_t *shape
      "buffer", // const int64_t *strides (of dst)
      "i32", // int32_t elem_size
    ],
    result: "i32",
  },
  // ---- ops: order, reductions, losses (minmax.c, cross_entropy.c) ----
  dt_clamp: { parameters: ["pointer", "pointer", "i64", "f32", "f32"], result: "i32" }, // (const float *x, float *y, int64_t n, float lo, float hi)
  dt_clamp_backward: {
    parameters: ["pointer", "pointer", "pointer", "i64", "f32", "f32"], // (const float *x, const float *gy, float *gx, int64_t n, float lo, float hi)
    result: "i32",
  },
  dt_abs: { parameters: ["pointer", "pointer", "i64"], result: "i32" }, // (const float *x, float *y, int64_t n)
  dt_abs_backward: { parameters: ["pointer", "pointer", "pointer", "i64"], result: "i32" }, // (const float *x, const float *gy, float *gx, int64_t n)
  dt_maximum: { parameters: ["pointer", "pointer", "pointer", "i64", "i32"], result: "i32" }, // (const float *a, const float *b, float *out, int64_t n, int32_t is_min)
  dt_maximum_backward: {
    parameters: [
      "pointer", // const float *a
      "pointer", // const float *b
      "pointer", // const float *gy
      "pointer", // float *ga (nullable)
      "pointer", // float *gb (nullable)
      "i64", // int64_t n
      "i32", // int32_t is_min
    ],
    result: "i32",
  },
  dt_max_rows: {
    parameters: ["pointer", "pointer", "pointer", "i64", "i64", "i32"], // (const float *x, float *values, int32_t *indices, int64_t rows, int64_t cols, int32_t is_min)
    result: "i32",
  },
  dt_index_rows_backward: {
    parameters: ["pointer", "pointer", "pointer", "i64", "i64"], // (const float *gy, const int32_t *indices, float *gx, int64_t rows, int64_t cols)
    result: "i32",
  },
  dt_extreme_backward: {
    parameters: ["pointer", "pointer", "pointer", "pointer", "i64"], // (const float *x, const float *value, const float *gy, float *gx, int64_t n)
    result: "i32",
  },
  dt_cross_entropy_backward: {
    parameters: ["pointer", "pointer", "pointer", "i64", "i64", "i32"], // (const float *grad, const float *gy, float *gx, int64_t rows, int64_t cols, int32_t per_row)
    result: "i32",
  },
  // ---- end ops ----
  // compare.c: the bool and i32 dtypes (dtype codes: DTypeCode below)
  dt_compare: {
    parameters: ["i32", "i32", "pointer", "i64", "pointer", "i64", "pointer", "i64"],
    result: "i32",
  }, // (int32_t op, int32_t dtype, const void *a, int64_t na, const void *b, int64_t nb, uint8_t *out, int64_t n)
  dt_cast: { parameters: ["pointer", "i32", "pointer", "i32", "i64"], result: "i32" }, // (const void *src, int32_t src_dtype, void *dst, int32_t dst_dtype, int64_t n)
  dt_fill_u8: { parameters: ["pointer", "i64", "i32"], result: "i32" }, // (uint8_t *dst, int64_t n, int32_t value)
  dt_sum_axis_int: {
    parameters: ["pointer", "i32", "pointer", "i64", "i64", "i64"],
    result: "i32",
  }, // (const void *x, int32_t dtype, int32_t *out, int64_t outer, int64_t axis, int64_t inner)
  dt_binary_i32: {
    parameters: ["i32", "pointer", "i64", "pointer", "i64", "pointer", "i64"],
    result: "i32",
  }, // (int32_t op, const int32_t *a, int64_t na, const int32_t *b, int64_t nb, int32_t *out, int64_t n)
  dt_clamp_range: { parameters: ["pointer", "pointer", "i64", "f32", "f32"], result: "i32" }, // (const float *x, float *y, int64_t n, float lo, float hi)
  // indexing.c
  dt_gather: {
    parameters: ["pointer", "buffer", "pointer", "buffer", "i32", "i32", "pointer"],
    result: "i32",
  }, // (const void *x, const int64_t *xshape, const int32_t *index, const int64_t *ishape, int32_t ndim, int32_t dim, void *out)
  dt_scatter_add: {
    parameters: ["pointer", "buffer", "pointer", "buffer", "i32", "i32", "pointer"],
    result: "i32",
  }, // (const float *gy, const int64_t *xshape, const int32_t *index, const int64_t *ishape, int32_t ndim, int32_t dim, float *gx)
  dt_index_select: {
    parameters: ["pointer", "pointer", "i64", "pointer", "i64", "i64", "i64"],
    result: "i32",
  }, // (const void *x, const int32_t *index, int64_t nindex, void *out, int64_t outer, int64_t axis, int64_t inner)
  dt_index_add: {
    parameters: ["pointer", "pointer", "i64", "pointer", "i64", "i64", "i64"],
    result: "i32",
  }, // (const float *gy, const int32_t *index, int64_t nindex, float *gx, int64_t outer, int64_t axis, int64_t inner)
  dt_copy_blocks: { parameters: ["pointer", "pointer", "i64", "i64", "i64", "i64"], result: "i32" }, // (const void *src, void *dst, int64_t rows, int64_t row_bytes, int64_t src_stride, int64_t dst_stride)
  dt_where: {
    parameters: ["pointer", "i64", "pointer", "i64", "pointer", "i64", "pointer", "i64"],
    result: "i32",
  }, // (const uint8_t *cond, int64_t nc, const void *a, int64_t na, const void *b, int64_t nb, void *out, int64_t n)
  dt_where_backward: {
    parameters: ["pointer", "i64", "pointer", "pointer", "pointer", "i64"],
    result: "i32",
  }, // (const uint8_t *cond, int64_t nc, const float *gy, float *ga, float *gb, int64_t n)
  dt_tril: { parameters: ["pointer", "pointer", "i64", "i64", "i64", "i64", "i32"], result: "i32" }, // (const void *x, void *out, int64_t batch, int64_t rows, int64_t cols, int64_t diagonal, int32_t upper)
} as const satisfies Deno.ForeignLibraryInterface;
