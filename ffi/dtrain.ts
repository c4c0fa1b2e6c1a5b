/**
 * The symbol table of `libdtrain.so` (csrc/core): the CPU kernels behind tensors, autograd, the
 * optimizers and data loading. Every function returning `i32` returns a status (0 = ok); the
 * message of a failure is read with `dt_last_error`. The ABI enums (csrc/core/dtrain.h) follow the
 * table.
 * @module
 */

import { lazyLibrary, type Symbols } from "./load.ts";

const symbols = {
  // errors.c
  dt_last_error: { parameters: ["buffer", "i64"], result: "i32" }, // int dt_last_error(char *buf, int64_t len)
  // alloc.c
  dt_alloc: { parameters: ["i64", "i32"], result: "pointer" }, // void *dt_alloc(int64_t nbytes, int32_t zero)
  dt_free: { parameters: ["pointer"], result: "void" }, // void dt_free(void *ptr)
  dt_allocated_bytes: { parameters: [], result: "i64" }, // int64_t dt_allocated_bytes(void)
  dt_allocated_blocks: { parameters: [], result: "i64" }, // int64_t dt_allocated_blocks(void)
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
      "pointer", // float *loss
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

/** The functions of `libdtrain.so` (64-bit sizes take numbers: [Note: 64-bit integers] in load.ts). */
export type DtrainSymbols = Symbols<typeof symbols>;

/**
 * Opens `libdtrain.so` once per process, on first call: `DTRAIN_LIB` if set, else `build/`. Only
 * the cpu device (src/tensor/device/cpu.ts) calls it; everything else goes through the device.
 *
 * @returns The library's functions.
 * @throws Error naming the paths tried and saying to run `make build`.
 */
export const loadDtrain: () => DtrainSymbols = lazyLibrary("libdtrain.so", "DTRAIN_LIB", symbols);

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

/** The symbol table itself: libdtrain_cuda.so exports the same kernels (ffi/cuda.ts shares it). */
export { symbols as dtrainSymbols };
