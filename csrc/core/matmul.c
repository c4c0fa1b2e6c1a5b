/* Matrix products: OpenBLAS's cblas_sgemm is the engine, never a hand-written loop. Products big
 * enough to share are cut into blocks of output rows or columns that run on the thread pool, one
 * single-threaded sgemm each (see [Note: one pool, single-threaded BLAS] in parallel.c). */
#include <cblas.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "dtrain.h"
#include "gemm_cut.h"

/* OpenBLAS's own introspection (not in cblas.h). */
char *openblas_get_config(void);
char *openblas_get_corename(void);


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
  return gemm_cut_parts(g->m, g->n, g->k, threads);
}

/* Block `part` of `parts` of g, cut along its output columns (else rows); possibly empty. */
static gemm_t gemm_block(const gemm_t *g, int part, int parts, int by_columns) {
  gemm_t block = *g;
  int64_t start, end;
  gemm_cut_block(by_columns ? g->n : g->m, part, parts, &start, &end);
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

/* [Note: small-matrix kernels]
 * OpenBLAS packs both operands of a product before multiplying, and at 64 rows re-packing the
 * whole weight matrix on every forward call costs as much as the arithmetic. Since 0.3.17, on
 * SkylakeX-class cores, it multiplies products of at most 10^6 multiply-adds without packing, and
 * for x @ w^T (its "TN" kernel) only while the output block has at most 1200 elements (see
 * kernel/x86_64/sgemm_small_kernel_permit_skylakex.c in OpenBLAS). A linear layer's forward at a
 * small batch is cut into blocks of 16 output columns that qualify: 1.4-1.6x faster on the
 * benchmark MLP. Elsewhere the blocks would take the packed path, so the cut is made only where
 * the core and version say the kernels exist; it depends on the shapes, never on the threads. */
#define SMALL_BLOCK 16
#define SMALL_MAX_MNK 1e6
#define SMALL_TN_MAX_MN 1200

static int small_kernels;
static pthread_once_t small_once = PTHREAD_ONCE_INIT;

static void detect_small_kernels(void) {
  int major = 0, minor = 0, patch = 0;
  const char *config = openblas_get_config(), *core = openblas_get_corename();
  if (config == NULL || core == NULL) return;
  if (sscanf(config, "OpenBLAS %d.%d.%d", &major, &minor, &patch) != 3) return;
  int recent = major > 0 || minor > 3 || (minor == 3 && patch >= 17);
  small_kernels = recent && (strcmp(core, "SkylakeX") == 0 || strcmp(core, "Cooperlake") == 0 ||
                             strcmp(core, "SapphireRapids") == 0);
}

/* Whether x[rows,in] @ w^T, in blocks of SMALL_BLOCK output columns, takes the unpacked kernels. */
static int small_forward(int64_t rows, int64_t in, int64_t out, int32_t w_trans) {
  pthread_once(&small_once, detect_small_kernels);
  return small_kernels && !w_trans && in >= 32 && SMALL_BLOCK * rows <= SMALL_TN_MAX_MN &&
         out <= SMALL_BLOCK * (MAX_BLOCKS / 2) &&
         (double)SMALL_BLOCK * (double)rows * (double)in <= SMALL_MAX_MNK;
}

/* Column blocks of a bias gradient: a linear layer's backward sums gy's columns in tasks of this
 * many columns beside its products, so that the sum does not run alone after them. */
#define BIAS_SUM_COLUMNS 256

/* A set of independent products, each cut into blocks, run as one parallel job. An optional
 * bias is added to a block's rows right after its product, while they are in cache (filling c
 * with the bias first and multiplying with beta = 1 cost OpenBLAS 5-20% more per product). An
 * optional column sum (a bias gradient) runs as more tasks of the same job. */
typedef struct {
  gemm_t blocks[MAX_BLOCKS];
  const float *bias[MAX_BLOCKS];
  int count;
  const float *sum_of; /* [sum_rows, sum_cols], summed over rows into sum_into */
  float *sum_into;
  int64_t sum_rows, sum_cols;
  int sum_tasks;
} gemm_job_t;

/* Adds g's blocks to the job, cut along the larger output dimension unless `by_columns` (rows on a
 * tie: a thread's block of rows is the one its core wrote in the kernel before, see parallel.c). */
static void add_product(gemm_job_t *job, const gemm_t *g, const float *bias, int parts,
                        int by_columns) {
  if (parts > MAX_BLOCKS - job->count) parts = MAX_BLOCKS - job->count;
  by_columns = by_columns || g->n > g->m;
  for (int p = 0; p < parts; p++) {
    gemm_t block = gemm_block(g, p, parts, by_columns);
    job->bias[job->count] = bias ? bias + (block.c - g->c) % g->ldc : NULL;
    job->blocks[job->count++] = block;
  }
}

/* sum_into[c] = sum over rows of sum_of[r, c] for one block of columns, rows added in order (the
 * same sums at any thread count). */
static void run_column_sum(const gemm_job_t *job, int64_t task) {
  int64_t begin = task * BIAS_SUM_COLUMNS;
  int64_t end = begin + BIAS_SUM_COLUMNS < job->sum_cols ? begin + BIAS_SUM_COLUMNS : job->sum_cols;
  float *dst = job->sum_into;
  for (int64_t c = begin; c < end; c++) dst[c] = 0.0f;
  for (int64_t r = 0; r < job->sum_rows; r++) {
    const float *src = job->sum_of + r * job->sum_cols;
    for (int64_t c = begin; c < end; c++) dst[c] += src[c];
  }
}

/* c[r, :n] += bias for each of m rows (ldc apart). */
static void add_bias_rows(float *restrict c, const float *restrict bias, int64_t m, int64_t n,
                          int64_t ldc) {
  for (int64_t r = 0; r < m; r++) {
    float *restrict row = c + r * ldc;
    for (int64_t j = 0; j < n; j++) row[j] += bias[j];
  }
}

static void run_block(void *ctx, int64_t i) {
  gemm_job_t *job = ctx;
  if (i >= job->count) return run_column_sum(job, i - job->count);
  const gemm_t *g = &job->blocks[i];
  gemm_run(g);
  if (job->bias[i]) add_bias_rows(g->c, job->bias[i], g->m, g->n, g->ldc);
}

/* Runs the job's blocks on the pool, or here when there is one block or too little work. */
static void run_job(gemm_job_t *job) {
  double flops = 0;
  for (int i = 0; i < job->count; i++)
    flops += 2.0 * (double)job->blocks[i].m * (double)job->blocks[i].n * (double)job->blocks[i].k;
  int tasks = job->count + job->sum_tasks;
  if (tasks == 1 || flops < MIN_PARALLEL_FLOPS) {
    for (int i = 0; i < tasks; i++) run_block(job, i);
    return;
  }
  dt_parallel(tasks, run_block, job);
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
  add_product(&job, &g, NULL, gemm_parts(&g, dt_get_num_threads()), 0);
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
              1.0f, 0.0f};
  int status = check_gemm("dt_linear_forward", &g);
  if (status != DT_OK) return status;
  if (rows == 0 || out == 0) return DT_OK;
  gemm_job_t job = {.count = 0};
  if (small_forward(rows, in, out, w_trans))
    add_product(&job, &g, bias, (int)((out + SMALL_BLOCK - 1) / SMALL_BLOCK), 1);
  else
    add_product(&job, &g, bias, gemm_parts(&g, dt_get_num_threads()), 0);
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
  if (gx) add_product(&job, &dx, NULL, gemm_parts(&dx, share), 0);
  if (gw) add_product(&job, &dw, NULL, gemm_parts(&dw, share), 0);
  if (gbias) {
    job.sum_of = gy;
    job.sum_into = gbias;
    job.sum_rows = rows;
    job.sum_cols = out;
    job.sum_tasks = (int)((out + BIAS_SUM_COLUMNS - 1) / BIAS_SUM_COLUMNS);
  }
  run_job(&job);
  return DT_OK;
}
