/* libdtrain's interface: every function it exports, declared once. csrc/core defines them for the
 * CPU; libdtrain_cuda (csrc/cuda) defines the kernels among them under the same names for device
 * memory. Both include this file, so the compiler checks that each definition matches its
 * declaration here, and tests/ffi/abi_test.ts checks the FFI table (ffi/dtrain.ts) against it.
 * Every function checks its arguments and returns a status (DT_OK on success); the message of the
 * last failure on the calling thread is read with dt_last_error(). No function keeps state between
 * calls beyond the byte counter of the allocator. */
#ifndef DTRAIN_H
#define DTRAIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The enums of the ABI, numbered as the TypeScript side numbers them (ffi/dtrain.ts;
 * tests/ffi/enums_test.ts holds each pair). The ops' enums (dt_unary_op, dt_binary_op) are in
 * scalar_math.h, beside each op's formula and derivative. */

/* The statuses of libdtrain and of libdtrain_cuda, whose kernels are these same functions;
 * DT_EDEVICE, a failed CUDA runtime, cuBLAS or NCCL call, is libdtrain_cuda's alone. */
enum dt_status { DT_OK = 0, DT_EINVAL = 1, DT_ENOMEM = 2, DT_EUNSUPPORTED = 3, DT_EDEVICE = 4 };
/* Element types (DTypeCode) and comparisons (CompareOp) of the bool and i32 kernels; bf16 and f16
 * are the 2-byte floats of the half kernels (half.c). */
enum dt_dtype { DT_F32 = 0, DT_I32 = 1, DT_BOOL = 2, DT_BF16 = 3, DT_F16 = 4 };
enum dt_compare_op { DT_EQ = 0, DT_NE = 1, DT_LT = 2, DT_LE = 3, DT_GT = 4, DT_GE = 5 };
/* dt_cross_entropy's reduction, as PyTorch's F.cross_entropy names it. */
enum dt_reduction { DT_REDUCTION_NONE = 0, DT_REDUCTION_MEAN = 1, DT_REDUCTION_SUM = 2 };

/* ---------------------------------------------------------------- errors.c */

/* Set the thread-local error message and return `status`; used by the CHECK macro. */
int dt_fail(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Copies the calling thread's last message into buf (len bytes); returns its full length. */
int dt_last_error(char *buf, int64_t len);

#define CHECK(cond, ...)                                                                           \
  do {                                                                                             \
    if (!(cond)) return dt_fail(DT_EINVAL, __VA_ARGS__);                                           \
  } while (0)
#define CHECK_PTR(p) CHECK((p) != NULL, "%s: argument '%s' is NULL", __func__, #p)
#define CHECK_COUNT(n) CHECK((n) >= 0, "%s: count '%s' is negative (%lld)", __func__, #n, (long long)(n))

/* ---------------------------------------------------------------- alloc.c */

/* NULL on failure, with the reason in dt_last_error. */
void *dt_alloc(int64_t nbytes, int32_t zero);
void dt_free(void *ptr);
int64_t dt_allocated_bytes(void);
int64_t dt_allocated_blocks(void);

/* ---------------------------------------------------------------- parallel.c (CPU only) */

void dt_set_num_threads(int32_t n);
/* The pool's size, the calling thread included. */
int32_t dt_get_num_threads(void);
/* Runs fn(ctx, i) for every task i in [0, tasks) on the thread pool, the caller included; returns
 * when all are done. Threads claim tasks in order as they become free. */
typedef void (*dt_task_fn)(void *ctx, int64_t i);
void dt_parallel(int64_t tasks, dt_task_fn fn, void *ctx);
/* Elements per thread below which an elementwise pass runs whole on the caller: handing off
 * costs more than it saves. */
#define DT_MIN_RANGE 32768
/* Runs fn(ctx, begin, end) over [0, n) cut into one range per thread (ranges of at least
 * min_chunk elements; a smaller n runs whole on the caller). */
typedef void (*dt_range_fn)(void *ctx, int64_t begin, int64_t end);
void dt_parallel_range(int64_t n, int64_t min_chunk, dt_range_fn fn, void *ctx);

/* ---------------------------------------------------------------- matmul.c */

int dt_matmul(const float *a, const float *b, float *c, int64_t m, int64_t n, int64_t k,
              int32_t trans_a, int32_t trans_b, int64_t lda, int64_t ldb, int64_t ldc, float alpha,
              float beta);
int dt_matmul_batched(const float *a, const float *b, float *c, int64_t batch, int64_t stride_a,
                      int64_t stride_b, int64_t stride_c, int64_t m, int64_t n, int64_t k,
                      int32_t trans_a, int32_t trans_b, float alpha, float beta);
int dt_linear_forward(const float *x, const float *w, const float *bias, float *y, int64_t rows,
                      int64_t in, int64_t out, int32_t w_trans, int64_t ldw);
int dt_linear_backward(const float *gy, const float *x, const float *w, float *gx, float *gw,
                       float *gbias, int64_t rows, int64_t in, int64_t out, int32_t w_trans,
                       int64_t ldw);

/* ---------------------------------------------------------------- matmul_bf16.c */

/* c_i = alpha * op(a_i) @ op(b_i) + beta * c_i for i < batch: a and b bf16, c f32, row-major with
 * dt_matmul's transposes and leading dimensions, and element strides between the batch's
 * matrices (0 repeats one matrix). On the CPU, oneDNN where the CPU has bf16 instructions, else
 * f32 sgemm of the bf16 values (dt_matmul's bits); on CUDA, cuBLAS with bf16 inputs. */
int dt_matmul_bf16(const void *a, const void *b, float *c, int64_t batch, int64_t stride_a,
                   int64_t stride_b, int64_t stride_c, int64_t m, int64_t n, int64_t k,
                   int32_t trans_a, int32_t trans_b, int64_t lda, int64_t ldb, int64_t ldc,
                   float alpha, float beta);
/* The engine of dt_matmul_bf16 (chosen on first use; DTRAIN_BF16_GEMM=auto|onednn|f32 forces
 * one): 0 f32 sgemm, 1 oneDNN, 2 cuBLAS, -1 none (a forced engine that cannot run); why, into
 * buf (len bytes). */
int32_t dt_matmul_bf16_backend(char *buf, int64_t len);

/* ---------------------------------------------------------------- elementwise.c */

int dt_fill_f32(float *dst, int64_t n, float value);
int dt_fill_i32(int32_t *dst, int64_t n, int32_t value);
int dt_copy(void *dst, const void *src, int64_t nbytes);
int dt_cast_i32_f32(const int32_t *src, float *dst, int64_t n);
int dt_cast_f32_i32(const float *src, int32_t *dst, int64_t n);
/* u16 (token storage) to i32, `n` elements. */
int dt_cast_u16_i32(const uint16_t *src, int32_t *dst, int64_t n);
/* half.c: f32 to bf16 or f16 (`dtype` DT_BF16, DT_F16), rounding to nearest even, and back. */
int dt_cast_f32_half(const float *src, void *dst, int64_t n, int32_t dtype);
int dt_cast_half_f32(const void *src, int32_t dtype, float *dst, int64_t n);
int dt_binary(int32_t op, const float *a, int64_t na, const float *b, int64_t nb, float *out,
              int64_t n);
int dt_binary_backward(int32_t op, const float *a, int64_t na, const float *b, int64_t nb,
                       const float *gy, int64_t n, float *ga, float *gb);
int dt_unary(int32_t op, const float *x, float *y, int64_t n, float p);
int dt_unary_backward(int32_t op, const float *x, const float *y, const float *gy, float *gx,
                      int64_t n, float p);
/* What op's backward reads: 0 nothing, 1 the input x, 2 the output y; -1 for an unknown op. */
int32_t dt_unary_reads(int32_t op);
int dt_axpy(float *y, const float *x, int64_t n, float alpha);

/* ---------------------------------------------------------------- slice.c */

int dt_copy_strided(const void *src, void *dst, int32_t ndim, const int64_t *shape,
                    const int64_t *strides, int32_t elem_size);
int dt_copy_to_strided(const void *src, void *dst, int32_t ndim, const int64_t *shape,
                       const int64_t *strides, int32_t elem_size);

/* ---------------------------------------------------------------- compare.c */

int dt_compare(int32_t op, int32_t dtype, const void *a, int64_t na, const void *b, int64_t nb,
               uint8_t *out, int64_t n);
int dt_cast(const void *src, int32_t src_dtype, void *dst, int32_t dst_dtype, int64_t n);
int dt_fill_u8(uint8_t *dst, int64_t n, int32_t value);
int dt_sum_axis_int(const void *x, int32_t dtype, int32_t *out, int64_t outer, int64_t axis,
                    int64_t inner);
int dt_binary_i32(int32_t op, const int32_t *a, int64_t na, const int32_t *b, int64_t nb,
                  int32_t *out, int64_t n);

/* ---------------------------------------------------------------- order.c */

int dt_clamp(const float *x, float *y, int64_t n, float lo, float hi);
int dt_clamp_range(const float *x, float *y, int64_t n, float lo, float hi);
int dt_clamp_backward(const float *x, const float *gy, float *gx, int64_t n, float lo, float hi);
int dt_abs(const float *x, float *y, int64_t n);
int dt_abs_backward(const float *x, const float *gy, float *gx, int64_t n);
int dt_maximum(const float *a, const float *b, float *out, int64_t n, int32_t is_min);
int dt_maximum_backward(const float *a, const float *b, const float *gy, float *ga, float *gb,
                        int64_t n, int32_t is_min);
int dt_max_rows(const float *x, float *values, int32_t *indices, int64_t rows, int64_t cols,
                int32_t is_min);
int dt_index_rows_backward(const float *gy, const int32_t *indices, float *gx, int64_t rows,
                           int64_t cols);
int dt_extreme_backward(const float *x, const float *value, const float *gy, float *gx, int64_t n);

/* ---------------------------------------------------------------- reduce.c */

/* out[o, i] = scale * sum_a x[o, a, i]; also the bias gradient of dt_linear_backward. */
int dt_sum_axis(const float *x, float *out, int64_t outer, int64_t axis, int64_t inner, float scale);
int dt_expand_axis(const float *gy, float *gx, int64_t outer, int64_t axis, int64_t inner,
                   float scale);
int dt_argmax_rows(const float *x, int32_t *out, int64_t rows, int64_t cols);
/* *out = sum of x[i] * x[i] over n elements (one float, device memory): squared L2 norms for
 * gradient clipping and the train job's divergence check, in one pass with no temporary. */
int dt_sum_squares(const float *x, int64_t n, float *out);

/* ---------------------------------------------------------------- indexing.c */

int dt_gather(const void *x, const int64_t *xshape, const int32_t *index, const int64_t *ishape,
              int32_t ndim, int32_t dim, void *out);
int dt_scatter_add(const float *gy, const int64_t *xshape, const int32_t *index,
                   const int64_t *ishape, int32_t ndim, int32_t dim, float *gx);
int dt_index_select(const void *x, const int32_t *index, int64_t nindex, void *out, int64_t outer,
                    int64_t axis, int64_t inner);
int dt_index_add(const float *gy, const int32_t *index, int64_t nindex, float *gx, int64_t outer,
                 int64_t axis, int64_t inner);
int dt_copy_blocks(const void *src, void *dst, int64_t rows, int64_t row_bytes, int64_t src_stride,
                   int64_t dst_stride);
int dt_where(const uint8_t *cond, int64_t nc, const void *a, int64_t na, const void *b, int64_t nb,
             void *out, int64_t n);
int dt_where_backward(const uint8_t *cond, int64_t nc, const float *gy, float *ga, float *gb,
                      int64_t n);
int dt_tril(const void *x, void *out, int64_t batch, int64_t rows, int64_t cols, int64_t diagonal,
            int32_t upper);

/* ---------------------------------------------------------------- nn.c */

int dt_softmax(const float *x, float *y, int64_t rows, int64_t cols, int32_t log);
int dt_softmax_backward(const float *y, const float *gy, float *gx, int64_t rows, int64_t cols,
                        int32_t log);
int dt_mse(const float *a, const float *b, int64_t n, float *loss, float *ga);
int dt_layernorm(const float *x, const float *w, const float *b, float *y, float *mean,
                 float *rstd, int64_t rows, int64_t cols, float eps);
int dt_layernorm_backward(const float *dy, const float *x, const float *w, const float *mean,
                          const float *rstd, float *dx, float *dw, float *db, int64_t rows,
                          int64_t cols);
int dt_embedding(const float *weight, const int32_t *indices, float *y, int64_t n, int64_t num,
                 int64_t dim);
int dt_embedding_backward(const float *gy, const int32_t *indices, float *gweight, int64_t n,
                          int64_t num, int64_t dim);
int dt_dropout(const float *x, float *y, int64_t n, float p, uint64_t seed, uint64_t offset);

/* ---------------------------------------------------------------- cross_entropy.c */

int dt_cross_entropy(const float *logits, const int32_t *targets, int64_t rows, int64_t cols,
                     int32_t ignore_index, float label_smoothing, int32_t reduction, float *loss,
                     float *grad);
int dt_cross_entropy_backward(const float *grad, const float *gy, float *gx, int64_t rows,
                              int64_t cols, int32_t per_row);

/* ---------------------------------------------------------------- attention.c */

int dt_attention_forward(const float *q, const float *k, const float *v, const float *mask,
                         float *out, float *lse, const int64_t *layout, int64_t bh, int64_t heads,
                         int64_t tq, int64_t tk, int64_t d, int64_t dv, float scale,
                         int32_t causal, float dropout_p, uint64_t seed, uint64_t offset);
int dt_attention_backward(const float *q, const float *k, const float *v, const float *mask,
                          const float *out, const float *lse, const float *gout, float *gq,
                          float *gk, float *gv, const int64_t *layout, int64_t bh, int64_t heads,
                          int64_t tq, int64_t tk, int64_t d, int64_t dv, float scale,
                          int32_t causal, float dropout_p, uint64_t seed, uint64_t offset);

/* ---------------------------------------------------------------- optim.c */

int dt_sgd_step(float *param, const float *grad, float *momentum_buf, int64_t n, float lr,
                float momentum, float dampening, int32_t nesterov, float weight_decay,
                int32_t first);
int dt_adamw_step(float *param, const float *grad, float *exp_avg, float *exp_avg_sq, int64_t n,
                  float lr, float beta1, float beta2, float eps, float weight_decay, int64_t step);

/* ---------------------------------------------------------------- random.c */

int dt_rand_uniform(float *dst, int64_t n, float lo, float hi, uint64_t seed, uint64_t offset);
int dt_randn(float *dst, int64_t n, float mean, float std, uint64_t seed, uint64_t offset);
/* dst[i] uniform in [low, high), low < high within the int32 range (high up to 2^31). */
int dt_randint(int32_t *dst, int64_t n, int64_t low, int64_t high, uint64_t seed, uint64_t offset);

/* ---------------------------------------------------------------- data.c */

int dt_gather_u8_f32(const uint8_t *src, int64_t src_rows, const int32_t *indices, int64_t n,
                     int64_t row_len, float scale, float shift, float *dst);
int dt_gather_rows(const void *src, int64_t src_rows, const int32_t *indices, int64_t n,
                   int64_t row_bytes, void *dst);
int dt_gather_u8_i32(const uint8_t *src, int64_t src_len, const int32_t *indices, int64_t n,
                     int32_t *dst);

/* ---------------------------------------------------------------- mapped_file.c (CPU only) */

/* How a mapping will be read, the madvise hint of dt_map_file (MapAccess in ffi/dtrain.ts). */
enum dt_map_access { DT_MAP_NORMAL = 0, DT_MAP_RANDOM = 1, DT_MAP_SEQUENTIAL = 2 };
/* Maps the whole file at `path` read-only and shared: pages are read on first touch and stay the
 * page cache's. An empty file maps to NULL with length 0. On failure (DT_EINVAL) *out_errno holds
 * errno (0 for a bad argument) and the message names the path. */
int dt_map_file(const char *path, int32_t access, void **out_ptr, int64_t *out_len,
                int32_t *out_errno);
/* Releases a mapping of dt_map_file; NULL with length 0 (an empty file's) is a no-op. */
int dt_unmap_file(void *ptr, int64_t len);

#ifdef __cplusplus
}
#endif

#endif
