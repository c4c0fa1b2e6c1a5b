/* Neural-network kernels, each a forward/backward pair: softmax, log-softmax, MSE, layer norm,
 * embedding and dropout (cross-entropy is in
 * cross_entropy.c). Rows are the last dimension of a contiguous tensor. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain.h"
#include "fast_exp.h"
#include "rows.h"
#include "scalar_math.h"

/* ---------------------------------------------------------------- softmax */

/* Rows are split into tasks of at least this many elements for the thread pool. */
#define ROW_TASK_ELEMENTS 32768

typedef struct {
  const float *x; float *y; const float *gy; float *gx; int64_t rows, cols, rows_per_task; int32_t log;
} softmax_job;

static void softmax_rows(const softmax_job *j, int64_t begin, int64_t end) {
  int64_t cols = j->cols;
  for (int64_t r = begin; r < end; r++) {
    const float *in = j->x + r * cols;
    float *out = j->y + r * cols;
    float max = dt_row_max(in, cols);
    /* exp(x - max) lands in out first (vectorised by fast_exp.h), then is scaled or replaced. */
    double sum = dt_exp_shift_sum(in, out, cols, max);
    if (j->log) {
      float lse = max + (float)log(sum);
      for (int64_t c = 0; c < cols; c++) out[c] = in[c] - lse;
    } else {
      float inv = (float)(1.0 / sum);
      for (int64_t c = 0; c < cols; c++) out[c] *= inv;
    }
  }
}

/* gx from the output y and gy: softmax gx = y * (gy - <gy, y>); log_softmax gx = gy - exp(y) * sum(gy). */
static void softmax_backward_rows(const softmax_job *j, int64_t begin, int64_t end) {
  int64_t cols = j->cols;
  for (int64_t r = begin; r < end; r++) {
    const float *yr = j->y + r * cols, *gr = j->gy + r * cols;
    float *out = j->gx + r * cols;
    /* log_softmax needs sum(gy), softmax <gy, y> */
    double acc = dt_row_dot(gr, j->log ? NULL : yr, cols);
    if (j->log) {
      for (int64_t c = 0; c < cols; c++) out[c] = gr[c] - dt_expf(yr[c]) * (float)acc;
    } else {
      for (int64_t c = 0; c < cols; c++) out[c] = yr[c] * (gr[c] - (float)acc);
    }
  }
}

static void softmax_task(void *ctx, int64_t i) {
  const softmax_job *j = ctx;
  int64_t begin = i * j->rows_per_task, end = begin + j->rows_per_task;
  softmax_rows(j, begin, end < j->rows ? end : j->rows);
}

static void softmax_backward_task(void *ctx, int64_t i) {
  const softmax_job *j = ctx;
  int64_t begin = i * j->rows_per_task, end = begin + j->rows_per_task;
  softmax_backward_rows(j, begin, end < j->rows ? end : j->rows);
}

/* Rows per pool task so that each task holds at least ROW_TASK_ELEMENTS elements. */
static int64_t rows_per_task(int64_t rows, int64_t cols) {
  int64_t per = ROW_TASK_ELEMENTS / cols;
  per = per < 1 ? 1 : per;
  int64_t threads = dt_get_num_threads();
  int64_t even = (rows + threads - 1) / threads;
  return per > even ? per : even;
}

/* y = softmax(x) (or log_softmax when log != 0) over each row of cols elements. */
int dt_softmax(const float *x, float *y, int64_t rows, int64_t cols, int32_t log) {
  CHECK_PTR(x); CHECK_PTR(y);
  CHECK(rows >= 0 && cols > 0, "dt_softmax: bad shape [%lld, %lld]", (long long)rows, (long long)cols);
  softmax_job j = {x, y, NULL, NULL, rows, cols, rows_per_task(rows, cols), log};
  dt_parallel((rows + j.rows_per_task - 1) / j.rows_per_task, softmax_task, &j);
  return DT_OK;
}

int dt_softmax_backward(const float *y, const float *gy, float *gx, int64_t rows, int64_t cols, int32_t log) {
  CHECK_PTR(y); CHECK_PTR(gy); CHECK_PTR(gx);
  CHECK(rows >= 0 && cols > 0, "dt_softmax_backward: bad shape");
  softmax_job j = {NULL, (float *)y, gy, gx, rows, cols, rows_per_task(rows, cols), log};
  dt_parallel((rows + j.rows_per_task - 1) / j.rows_per_task, softmax_backward_task, &j);
  return DT_OK;
}

/* ---------------------------------------------------------------- MSE */

/* loss = mean((a - b)^2); when ga is not NULL also d loss / d a (d loss / d b is its negative). */
int dt_mse(const float *a, const float *b, int64_t n, float *loss, float *ga) {
  CHECK_PTR(a); CHECK_PTR(b); CHECK_PTR(loss); CHECK_COUNT(n);
  double total = 0.0;
  float scale = n ? 2.0f / (float)n : NAN;
  for (int64_t i = 0; i < n; i++) {
    float d = a[i] - b[i];
    total += (double)d * d;
    if (ga) ga[i] = scale * d;
  }
  *loss = n ? (float)(total / (double)n) : NAN;
  return DT_OK;
}

/* ---------------------------------------------------------------- layer norm */

/* y = (x - mean) * rstd * w + b over rows of cols elements (biased variance, like PyTorch); saves
 * mean[rows] and rstd[rows] for the backward. w and b may be NULL (no affine). */
typedef struct {
  const float *x, *w, *b;
  float *y, *mean, *rstd;
  int64_t cols;
  float eps;
} layernorm_t;

static void layernorm_rows(void *ctx, int64_t begin, int64_t end) {
  const layernorm_t *j = ctx;
  int64_t cols = j->cols;
  for (int64_t r = begin; r < end; r++) {
    const float *in = j->x + r * cols;
    float *out = j->y + r * cols;
    double mu = dt_row_dot(in, NULL, cols) / (double)cols;
    float m = (float)mu, rs = (float)(1.0 / sqrt(dt_row_sq_dev(in, mu, cols) / (double)cols + j->eps));
    j->mean[r] = m;
    j->rstd[r] = rs;
    for (int64_t c = 0; c < cols; c++) {
      float v = (in[c] - m) * rs;
      out[c] = (j->w ? v * j->w[c] : v) + (j->b ? j->b[c] : 0.0f);
    }
  }
}

/* Rows are independent: they run on the thread pool, each computed exactly as alone. */
int dt_layernorm(const float *x, const float *w, const float *b, float *y, float *mean, float *rstd,
                 int64_t rows, int64_t cols, float eps) {
  CHECK_PTR(x); CHECK_PTR(y); CHECK_PTR(mean); CHECK_PTR(rstd);
  CHECK(rows >= 0 && cols > 0, "dt_layernorm: bad shape [%lld, %lld]", (long long)rows, (long long)cols);
  layernorm_t j = {x, w, b, y, mean, rstd, cols, eps};
  int64_t min_rows = 32768 / cols > 0 ? 32768 / cols : 1;
  dt_parallel_range(rows, min_rows, layernorm_rows, &j);
  return DT_OK;
}

/* Rows per task of the layer-norm backward: a fixed size, so that the partial weight and bias
 * gradients add up in the same order whatever the thread count. */
#define LN_BACKWARD_ROWS 32

typedef struct {
  const float *dy, *x, *w, *mean, *rstd;
  float *dx, *partial; /* partial: [tasks][2 * cols], dw then db of each task's rows */
  int64_t rows, cols;
} layernorm_backward_t;

/* pdw += dy * xhat, pdb += dy over one row. */
static void accumulate_affine_grads(float *restrict pdw, float *restrict pdb, const float *restrict g,
                                    const float *restrict in, float m, float rs, int64_t cols) {
  for (int64_t c = 0; c < cols; c++) {
    pdw[c] += g[c] * ((in[c] - m) * rs);
    pdb[c] += g[c];
  }
}

static void layernorm_backward_task(void *ctx, int64_t task) {
  const layernorm_backward_t *j = ctx;
  int64_t cols = j->cols, begin = task * LN_BACKWARD_ROWS;
  int64_t end = begin + LN_BACKWARD_ROWS < j->rows ? begin + LN_BACKWARD_ROWS : j->rows;
  float *pdw = j->partial + task * 2 * cols, *pdb = pdw + cols;
  const float *w = j->w;
  memset(pdw, 0, (size_t)(2 * cols) * sizeof(float));
  for (int64_t r = begin; r < end; r++) {
    const float *g = j->dy + r * cols, *in = j->x + r * cols;
    float m = j->mean[r], rs = j->rstd[r];
    accumulate_affine_grads(pdw, pdb, g, in, m, rs, cols);
    if (!j->dx) continue;
    /* dxhat = dy * w goes into dx's row first; its two sums are double-lane dot products (see
     * rows.h), sum(dxhat * xhat) taken as rs * (sum(dxhat * x) - mean * sum(dxhat)), as ATen's
     * layer-norm backward does, so that every loop here vectorises. */
    float *out = j->dx + r * cols;
    for (int64_t c = 0; c < cols; c++) out[c] = g[c] * w[c];
    double sum_dxhat = dt_row_dot(out, NULL, cols);
    double sum_dxhat_xhat = rs * (dt_row_dot(out, in, cols) - m * sum_dxhat);
    float mean_dxhat = (float)(sum_dxhat / (double)cols);
    float mean_dxhat_xhat = (float)(sum_dxhat_xhat / (double)cols);
    for (int64_t c = 0; c < cols; c++)
      out[c] = rs * (out[c] - mean_dxhat - (in[c] - m) * rs * mean_dxhat_xhat);
  }
}

/* dx (may be NULL) and dw, db accumulated (+=; either may be NULL) from dy and the saved stats.
 * Blocks of rows run on the thread pool; their partial dw, db are added in block order. */
int dt_layernorm_backward(const float *dy, const float *x, const float *w, const float *mean,
                          const float *rstd, float *dx, float *dw, float *db, int64_t rows, int64_t cols) {
  CHECK_PTR(dy); CHECK_PTR(x); CHECK_PTR(mean); CHECK_PTR(rstd);
  CHECK(rows >= 0 && cols > 0, "dt_layernorm_backward: bad shape");
  int64_t tasks = (rows + LN_BACKWARD_ROWS - 1) / LN_BACKWARD_ROWS;
  if (tasks == 0) return DT_OK;
  /* Without an affine weight, a row of ones stands in for it: one loop serves both. */
  float *partial = malloc((size_t)(tasks * 2 * cols + (w ? 0 : cols)) * sizeof(float));
  if (!partial) return dt_fail(DT_ENOMEM, "layerNorm backward: out of memory (%lld rows)", (long long)rows);
  if (!w) {
    float *ones = partial + tasks * 2 * cols;
    for (int64_t c = 0; c < cols; c++) ones[c] = 1.0f;
    w = ones;
  }
  layernorm_backward_t j = {dy, x, w, mean, rstd, dx, partial, rows, cols};
  dt_parallel(tasks, layernorm_backward_task, &j);
  for (int64_t t = 0; t < tasks; t++) {
    const float *pdw = partial + t * 2 * cols, *pdb = pdw + cols;
    if (dw) for (int64_t c = 0; c < cols; c++) dw[c] += pdw[c];
    if (db) for (int64_t c = 0; c < cols; c++) db[c] += pdb[c];
  }
  free(partial);
  return DT_OK;
}

/* ---------------------------------------------------------------- embedding */

/* y[i, :] = weight[indices[i], :] for n indices into a [num, dim] table. */
int dt_embedding(const float *weight, const int32_t *indices, float *y, int64_t n, int64_t num, int64_t dim) {
  CHECK_PTR(weight); CHECK_PTR(indices); CHECK_PTR(y);
  CHECK(n >= 0 && num >= 0 && dim >= 0, "dt_embedding: negative size");
  for (int64_t i = 0; i < n; i++) {
    int32_t k = indices[i];
    CHECK(k >= 0 && k < num, "embedding: index %d at position %lld is out of range [0, %lld)", k,
          (long long)i, (long long)num);
    memcpy(y + i * dim, weight + (int64_t)k * dim, (size_t)dim * sizeof(float));
  }
  return DT_OK;
}

/* gweight[indices[i], :] += gy[i, :]: scatter-add, so repeated indices sum. */
int dt_embedding_backward(const float *gy, const int32_t *indices, float *gweight, int64_t n, int64_t num, int64_t dim) {
  CHECK_PTR(gy); CHECK_PTR(indices); CHECK_PTR(gweight);
  for (int64_t i = 0; i < n; i++) {
    int32_t k = indices[i];
    CHECK(k >= 0 && k < num, "embedding: index %d out of range [0, %lld)", k, (long long)num);
    float *dst = gweight + (int64_t)k * dim;
    const float *src = gy + i * dim;
    for (int64_t d = 0; d < dim; d++) dst[d] += src[d];
  }
  return DT_OK;
}

/* ---------------------------------------------------------------- dropout */

/* y = x * keep / (1 - p), keep drawn from the counter RNG at (seed, offset + i). The backward is
 * the same call on the upstream gradient with the same seed and offset, so no mask is stored. */
int dt_dropout(const float *x, float *y, int64_t n, float p, uint64_t seed, uint64_t offset) {
  CHECK_PTR(x); CHECK_PTR(y); CHECK_COUNT(n);
  CHECK(p >= 0.0f && p < 1.0f, "dropout: probability %g is outside [0, 1)", (double)p);
  float scale = 1.0f / (1.0f - p);
  for (int64_t i = 0; i < n; i++) y[i] = dt_dropout_keeps(seed, offset + (uint64_t)i, p) ? x[i] * scale : 0.0f;
  return DT_OK;
}
