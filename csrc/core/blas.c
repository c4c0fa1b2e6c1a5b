/* Matrix products: OpenBLAS's cblas_sgemm is the engine, never a hand-written loop. Products big
 * enough to share are cut into blocks of output rows or columns that run on the thread pool, one
 * single-threaded sgemm each (see [Note: one pool, single-threaded BLAS] in parallel.c). */
#include <cblas.h>

#include "dtrain.h"

/* Products under this many flops run whole on the calling thread: handing off costs more. */
#define MIN_PARALLEL_FLOPS 4e6
/* Blocks are cut at multiples of this many rows or columns (the sgemm kernels' tile). */
#define BLOCK_ALIGN 16
#define MAX_BLOCKS 128

/* c[m,n] = alpha * op(a) @ op(b) + beta * c, row-major, as cblas_sgemm takes it. */
typedef struct {
  const float *a, *b;
  float *c;
  int64_t m, n, k, lda, ldb, ldc;
  int32_t trans_a, trans_b;
  float alpha, beta;
} gemm_t;

static void gemm_run(const gemm_t *g) {
  if (g->m == 0 || g->n == 0) return;
  cblas_sgemm(CblasRowMajor, g->trans_a ? CblasTrans : CblasNoTrans,
              g->trans_b ? CblasTrans : CblasNoTrans, (blasint)g->m, (blasint)g->n, (blasint)g->k,
              g->alpha, g->a, (blasint)g->lda, g->b, (blasint)g->ldb, g->beta, g->c,
              (blasint)g->ldc);
}

/* How many blocks g is worth cutting into for `threads` threads. */
static int gemm_parts(const gemm_t *g, int threads) {
  if (threads <= 1 || 2.0 * (double)g->m * (double)g->n * (double)g->k < MIN_PARALLEL_FLOPS) return 1;
  int64_t dim = g->n >= g->m ? g->n : g->m;
  int64_t most = (dim + BLOCK_ALIGN - 1) / BLOCK_ALIGN;
  return most < threads ? (int)most : threads;
}

/* Block `part` of `parts` of g, cut along its larger output dimension (possibly empty). */
static gemm_t gemm_block(const gemm_t *g, int part, int parts) {
  gemm_t block = *g;
  int by_columns = g->n >= g->m;
  int64_t dim = by_columns ? g->n : g->m;
  int64_t step = (dim + parts - 1) / parts;
  step = (step + BLOCK_ALIGN - 1) / BLOCK_ALIGN * BLOCK_ALIGN;
  int64_t start = part * step < dim ? part * step : dim;
  int64_t end = start + step < dim ? start + step : dim;
  if (by_columns) {
    block.n = end - start;
    block.b += g->trans_b ? start * g->ldb : start;
    block.c += start;
  } else {
    block.m = end - start;
    block.a += g->trans_a ? start : start * g->lda;
    block.c += start * g->ldc;
  }
  return block;
}

/* A set of independent products, each cut into blocks, run as one parallel job. An optional
 * bias is written into c's rows before a block's product accumulates onto it (beta = 1). */
typedef struct {
  gemm_t blocks[MAX_BLOCKS];
  const float *bias[MAX_BLOCKS];
  int count;
} gemm_job_t;

static void add_product(gemm_job_t *job, const gemm_t *g, const float *bias, int parts) {
  for (int p = 0; p < parts && job->count < MAX_BLOCKS; p++) {
    gemm_t block = gemm_block(g, p, parts);
    job->bias[job->count] = bias ? bias + (block.c - g->c) % g->ldc : NULL;
    job->blocks[job->count++] = block;
  }
}

static void run_block(void *ctx, int64_t i) {
  gemm_job_t *job = ctx;
  const gemm_t *g = &job->blocks[i];
  const float *bias = job->bias[i];
  if (bias)
    for (int64_t r = 0; r < g->m; r++)
      for (int64_t j = 0; j < g->n; j++) g->c[r * g->ldc + j] = bias[j];
  gemm_run(g);
}

/* Runs the job's blocks on the pool, or here when there is one block or too little work. */
static void run_job(gemm_job_t *job) {
  double flops = 0;
  for (int i = 0; i < job->count; i++)
    flops += 2.0 * (double)job->blocks[i].m * (double)job->blocks[i].n * (double)job->blocks[i].k;
  if (job->count == 1 || flops < MIN_PARALLEL_FLOPS) {
    for (int i = 0; i < job->count; i++) run_block(job, i);
    return;
  }
  dt_parallel(job->count, run_block, job);
}

static int check_gemm(const char *fn, const gemm_t *g) {
  CHECK(g->a != NULL && g->b != NULL && g->c != NULL, "%s: NULL matrix", fn);
  CHECK(g->m >= 0 && g->n >= 0 && g->k >= 0, "%s: negative size m=%lld n=%lld k=%lld", fn,
        (long long)g->m, (long long)g->n, (long long)g->k);
  CHECK(g->lda >= (g->trans_a ? g->m : g->k) && g->lda >= 1, "%s: lda %lld too small", fn, (long long)g->lda);
  CHECK(g->ldb >= (g->trans_b ? g->k : g->n) && g->ldb >= 1, "%s: ldb %lld too small", fn, (long long)g->ldb);
  CHECK(g->ldc >= g->n && g->ldc >= 1, "%s: ldc %lld too small", fn, (long long)g->ldc);
  return DT_OK;
}

/* c[m,n] = alpha * op(a) @ op(b) + beta * c, row-major. op(a) is [m,k]: a is stored [m,k] with
 * lda >= k, or [k,m] with lda >= m when trans_a. Likewise op(b) is [k,n]. */
int dt_matmul(const float *a, const float *b, float *c, int64_t m, int64_t n, int64_t k,
              int32_t trans_a, int32_t trans_b, int64_t lda, int64_t ldb, int64_t ldc, float alpha,
              float beta) {
  gemm_t g = {a, b, c, m, n, k, lda, ldb, ldc, trans_a, trans_b, alpha, beta};
  int status = check_gemm("dt_matmul", &g);
  if (status != DT_OK) return status;
  if (m == 0 || n == 0) return DT_OK;
  gemm_job_t job = {.count = 0};
  add_product(&job, &g, NULL, gemm_parts(&g, dt_get_num_threads()));
  run_job(&job);
  return DT_OK;
}

/* Batched product: `batch` independent products with element strides between consecutive
 * matrices (a stride of 0 reuses one matrix for every batch). */
int dt_matmul_batched(const float *a, const float *b, float *c, int64_t batch, int64_t stride_a,
                      int64_t stride_b, int64_t stride_c, int64_t m, int64_t n, int64_t k,
                      int32_t trans_a, int32_t trans_b, float alpha, float beta) {
  CHECK(batch >= 0, "dt_matmul_batched: negative batch %lld", (long long)batch);
  for (int64_t i = 0; i < batch; i++) {
    int status = dt_matmul(a + i * stride_a, b + i * stride_b, c + i * stride_c, m, n, k, trans_a,
                           trans_b, trans_a ? m : k, trans_b ? k : n, n, alpha, beta);
    if (status != DT_OK) return status;
  }
  return DT_OK;
}

/* ---------------------------------------------------------------- linear layers */

/* y[rows,out] = x[rows,in] @ w^T + bias, PyTorch's addmm. w is [out,in] with leading dimension
 * ldw, or its transpose ([in,out]) when w_trans. bias (out) may be NULL. */
int dt_linear_forward(const float *x, const float *w, const float *bias, float *y, int64_t rows,
                      int64_t in, int64_t out, int32_t w_trans, int64_t ldw) {
  CHECK_PTR(x); CHECK_PTR(w); CHECK_PTR(y);
  gemm_t g = {x, w, y, rows, out, in, in > 1 ? in : 1, ldw, out > 1 ? out : 1, 0, !w_trans,
              1.0f, bias ? 1.0f : 0.0f};
  int status = check_gemm("dt_linear_forward", &g);
  if (status != DT_OK) return status;
  if (rows == 0 || out == 0) return DT_OK;
  gemm_job_t job = {.count = 0};
  add_product(&job, &g, bias, gemm_parts(&g, dt_get_num_threads()));
  run_job(&job);
  return DT_OK;
}

/* Gradients of dt_linear_forward from gy[rows,out]: gx[rows,in] = gy @ w, gw[out,in] = gy^T @ x,
 * gbias[out] = the column sums of gy. Any of gx, gw, gbias may be NULL when not needed. The two
 * products are independent and run side by side on the pool. */
int dt_linear_backward(const float *gy, const float *x, const float *w, float *gx, float *gw,
                       float *gbias, int64_t rows, int64_t in, int64_t out, int32_t w_trans,
                       int64_t ldw) {
  CHECK_PTR(gy); CHECK_PTR(x); CHECK_PTR(w);
  int64_t ld_in = in > 1 ? in : 1, ld_out = out > 1 ? out : 1;
  gemm_t dx = {gy, w, gx, rows, in, out, ld_out, ldw, ld_in, 0, w_trans, 1.0f, 0.0f};
  gemm_t dw = {gy, x, gw, out, in, rows, ld_out, ld_in, ld_in, 1, 0, 1.0f, 0.0f};
  int status;
  if (gx && (status = check_gemm("dt_linear_backward", &dx)) != DT_OK) return status;
  if (gw && (status = check_gemm("dt_linear_backward", &dw)) != DT_OK) return status;
  int threads = dt_get_num_threads();
  int products = (gx != NULL) + (gw != NULL);
  int share = products > 0 ? (threads + products - 1) / products : threads;
  gemm_job_t job = {.count = 0};
  if (gx) add_product(&job, &dx, NULL, gemm_parts(&dx, share));
  if (gw) add_product(&job, &dw, NULL, gemm_parts(&dw, share));
  run_job(&job);
  if (gbias) return dt_sum_axis(gy, gbias, 1, rows, out, 1.0f);
  return DT_OK;
}
