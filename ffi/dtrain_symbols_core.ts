/**
 * The first half of `libdtrain.so`'s symbol table (ffi/dtrain.ts joins the halves): errors,
 * allocation, matrix products, the thread pool, elementwise ops, reductions, the nn kernels,
 * random numbers, optimizers and data gathers. Each entry carries its C prototype.
 * @module
 */

/** Symbols of csrc/core's original kernels. */
export const coreSymbols = {
  // errors.c
  dt_last_error: { parameters: ["buffer", "i64"], result: "i32" }, // int dt_last_error(char *buf, int64_t len)
  // alloc.c
  dt_alloc: { parameters: ["i64", "i32"], result: "pointer" }, // void *dt_alloc(int64_t nbytes, int32_t zero)
  dt_free: { parameters: ["pointer"], result: "void" }, // void dt_free(void *ptr)
  dt_allocated_bytes: { parameters: [], result: "i64" }, // int64_t dt_allocated_bytes(void)
  dt_allocated_blocks: { parameters: [], result: "i64" }, // int64_t dt_allocated_blocks(void)
  // OpenBLAS's, found through libdtrain's dependencies; absent with another BLAS.
  openblas_get_corename: { parameters: [], result: "pointer", optional: true }, // char *openblas_get_corename(void)
  // blas.c
  dt_matmul: {
    parameters: [
      "pointer", // const float *a
      "pointer", // const float *b
      "pointer", // float *c
      "i64", // int64_t m
      "i64", // int64_t n
      "i64", // int64_t k
      "i32", // int32_t trans_a
      "i32", // int32_t trans_b
      "i64", // int64_t lda
      "i64", // int64_t ldb
      "i64", // int64_t ldc
      "f32", // float alpha
      "f32", // float beta
    ],
    result: "i32",
  },
  dt_matmul_batched: {
    parameters: [
      "pointer", // const float *a
      "pointer", // const float *b
      "pointer", // float *c
      "i64", // int64_t batch
      "i64", // int64_t stride_a
      "i64", // int64_t stride_b
      "i64", // int64_t stride_c
      "i64", // int64_t m
      "i64", // int64_t n
      "i64", // int64_t k
      "i32", // int32_t trans_a
      "i32", // int32_t trans_b
      "f32", // float alpha
      "f32", // float beta
    ],
    result: "i32",
  },
  dt_linear_forward: {
    parameters: [
      "pointer", // const float *x
      "pointer", // const float *w
      "pointer", // const float *bias (nullable)
      "pointer", // float *y
      "i64", // int64_t rows
      "i64", // int64_t in
      "i64", // int64_t out
      "i32", // int32_t w_trans
      "i64", // int64_t ldw
    ],
    result: "i32",
  },
  dt_linear_backward: {
    parameters: [
      "pointer", // const float *gy
      "pointer", // const float *x
      "pointer", // const float *w
      "pointer", // float *gx (nullable)
      "pointer", // float *gw (nullable)
      "pointer", // float *gbias (nullable)
      "i64", // int64_t rows
      "i64", // int64_t in
      "i64", // int64_t out
      "i32", // int32_t w_trans
      "i64", // int64_t ldw
    ],
    result: "i32",
  },
  // parallel.c
  dt_set_num_threads: { parameters: ["i32"], result: "void" }, // void dt_set_num_threads(int32_t n)
  dt_get_num_threads: { parameters: [], result: "i32" }, // int32_t dt_get_num_threads(void)
  // elementwise.c
  dt_fill_f32: { parameters: ["pointer", "i64", "f32"], result: "i32" }, // (float *dst, int64_t n, float value)
  dt_fill_i32: { parameters: ["pointer", "i64", "i32"], result: "i32" }, // (int32_t *dst, int64_t n, int32_t value)
  dt_copy: { parameters: ["pointer", "pointer", "i64"], result: "i32" }, // (void *dst, const void *src, int64_t nbytes)
  dt_copy_strided: {
    parameters: [
      "pointer", // const void *src
      "pointer", // void *dst
      "i32", // int32_t ndim
      "buffer", // const int64_t *shape
      "buffer", // const int64_t *strides
      "i32", // int32_t elem_size
    ],
    result: "i32",
  },
  dt_cast_i32_f32: { parameters: ["pointer", "pointer", "i64"], result: "i32" }, // (const int32_t *src, float *dst, int64_t n)
  dt_cast_f32_i32: { parameters: ["pointer", "pointer", "i64"], result: "i32" }, // (const float *src, int32_t *dst, int64_t n)
  dt_binary: {
    parameters: [
      "i32", // int32_t op
      "pointer", // const float *a
      "i64", // int64_t na
      "pointer", // const float *b
      "i64", // int64_t nb
      "pointer", // float *out
      "i64", // int64_t n
    ],
    result: "i32",
  },
  dt_binary_backward: {
    parameters: [
      "i32", // int32_t op
      "pointer", // const float *a
      "i64", // int64_t na
      "pointer", // const float *b
      "i64", // int64_t nb
      "pointer", // const float *gy
      "i64", // int64_t n
      "pointer", // float *ga (nullable)
      "pointer", // float *gb (nullable)
    ],
    result: "i32",
  },
  dt_unary: { parameters: ["i32", "pointer", "pointer", "i64", "f32"], result: "i32" }, // (int32_t op, const float *x, float *y, int64_t n, float p)
  dt_unary_backward: {
    parameters: [
      "i32", // int32_t op
      "pointer", // const float *x (nullable)
      "pointer", // const float *y (nullable)
      "pointer", // const float *gy
      "pointer", // float *gx
      "i64", // int64_t n
      "f32", // float p
    ],
    result: "i32",
  },
  dt_axpy: { parameters: ["pointer", "pointer", "i64", "f32"], result: "i32" }, // (float *y, const float *x, int64_t n, float alpha)
  // reduce.c
  dt_sum_axis: { parameters: ["pointer", "pointer", "i64", "i64", "i64", "f32"], result: "i32" }, // (const float *x, float *out, int64_t outer, int64_t axis, int64_t inner, float scale)
  dt_expand_axis: { parameters: ["pointer", "pointer", "i64", "i64", "i64", "f32"], result: "i32" }, // (const float *gy, float *gx, int64_t outer, int64_t axis, int64_t inner, float scale)
  dt_argmax_rows: { parameters: ["pointer", "pointer", "i64", "i64"], result: "i32" }, // (const float *x, int32_t *out, int64_t rows, int64_t cols)
  // nn.c
  dt_softmax: { parameters: ["pointer", "pointer", "i64", "i64", "i32"], result: "i32" }, // (const float *x, float *y, int64_t rows, int64_t cols, int32_t log)
  dt_softmax_backward: {
    parameters: ["pointer", "pointer", "pointer", "i64", "i64", "i32"], // (const float *y, const float *gy, float *gx, int64_t rows, int64_t cols, int32_t log)
    result: "i32",
  },
  dt_cross_entropy: {
    parameters: [
      "pointer", // const float *logits
      "pointer", // const int32_t *targets
      "i64", // int64_t rows
      "i64", // int64_t cols
      "i32", // int32_t ignore_index
      "f32", // float label_smoothing
      "i32", // int32_t reduction (0 none, 1 mean, 2 sum)
      "pointer", // float *loss (1 float, or rows for none)
      "pointer", // float *grad (nullable)
    ],
    result: "i32",
  },
  dt_mse: { parameters: ["pointer", "pointer", "i64", "pointer", "pointer"], result: "i32" }, // (const float *a, const float *b, int64_t n, float *loss, float *ga)
  dt_layernorm: {
    parameters: [
      "pointer", // const float *x
      "pointer", // const float *w (nullable)
      "pointer", // const float *b (nullable)
      "pointer", // float *y
      "pointer", // float *mean
      "pointer", // float *rstd
      "i64", // int64_t rows
      "i64", // int64_t cols
      "f32", // float eps
    ],
    result: "i32",
  },
  dt_layernorm_backward: {
    parameters: [
      "pointer", // const float *dy
      "pointer", // const float *x
      "pointer", // const float *w (nullable)
      "pointer", // const float *mean
      "pointer", // const float *rstd
      "pointer", // float *dx (nullable)
      "pointer", // float *dw (nullable, accumulated)
      "pointer", // float *db (nullable, accumulated)
      "i64", // int64_t rows
      "i64", // int64_t cols
    ],
    result: "i32",
  },
  dt_embedding: {
    parameters: ["pointer", "pointer", "pointer", "i64", "i64", "i64"], // (const float *weight, const int32_t *indices, float *y, int64_t n, int64_t num, int64_t dim)
    result: "i32",
  },
  dt_embedding_backward: {
    parameters: ["pointer", "pointer", "pointer", "i64", "i64", "i64"], // (const float *gy, const int32_t *indices, float *gweight, int64_t n, int64_t num, int64_t dim)
    result: "i32",
  },
  dt_dropout: {
    parameters: ["pointer", "pointer", "i64", "f32", "u64", "u64"], // (const float *x, float *y, int64_t n, float p, uint64_t seed, uint64_t offset)
    result: "i32",
  },
  // random.c
  dt_rand_uniform: {
    parameters: ["pointer", "i64", "f32", "f32", "u64", "u64"], // (float *dst, int64_t n, float lo, float hi, uint64_t seed, uint64_t offset)
    result: "i32",
  },
  dt_randn: {
    parameters: ["pointer", "i64", "f32", "f32", "u64", "u64"], // (float *dst, int64_t n, float mean, float std, uint64_t seed, uint64_t offset)
    result: "i32",
  },
  // optim.c
  dt_sgd_step: {
    parameters: [
      "pointer", // float *param
      "pointer", // const float *grad
      "pointer", // float *momentum_buf (nullable)
      "i64", // int64_t n
      "f32", // float lr
      "f32", // float momentum
      "f32", // float dampening
      "i32", // int32_t nesterov
      "f32", // float weight_decay
      "i32", // int32_t first
    ],
    result: "i32",
  },
  dt_adamw_step: {
    parameters: [
      "pointer", // float *param
      "pointer", // const float *grad
      "pointer", // float *exp_avg
      "pointer", // float *exp_avg_sq
      "i64", // int64_t n
      "f32", // float lr
      "f32", // float beta1
      "f32", // float beta2
      "f32", // float eps
      "f32", // float weight_decay
      "i64", // int64_t step
    ],
    result: "i32",
  },
  // data.c
  dt_gather_u8_f32: {
    parameters: [
      "pointer", // const uint8_t *src
      "i64", // int64_t src_rows
      "pointer", // const int32_t *indices
      "i64", // int64_t n
      "i64", // int64_t row_len
      "f32", // float scale
      "f32", // float shift
      "pointer", // float *dst
    ],
    result: "i32",
  },
  dt_gather_rows: {
    parameters: ["pointer", "i64", "pointer", "i64", "i64", "pointer"], // (const void *src, int64_t src_rows, const int32_t *indices, int64_t n, int64_t row_bytes, void *dst)
    result: "i32",
  },
  dt_gather_u8_i32: {
    parameters: ["pointer", "i64", "pointer", "i64", "pointer"], // (const uint8_t *src, int64_t src_len, const int32_t *indices, int64_t n, int32_t *dst)
    result: "i32",
  },
} as const satisfies Deno.ForeignLibraryInterface;
