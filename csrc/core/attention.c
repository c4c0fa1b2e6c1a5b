/* Fused scaled dot-product attention, forward and backward, after FlashAttention: the forward
 * saves only each query row's log-sum-exp, and the backward recomputes the probabilities from it,
 * so nothing of size [T, T] lives between the two. Work is cut into blocks of query rows; each
 * block's scores sit in a scratch of BLOCK_Q x Tk floats while the block is processed, and the
 * products run through single-threaded cblas_sgemm calls on the thread pool.
 *
 * Layout: q [BH, Tq, D], k [BH, Tk, D], v [BH, Tk, Dv], out [BH, Tq, Dv], lse [BH, Tq], all
 * contiguous. The optional additive mask is indexed (bh / heads) * mask_stride_b + (bh % heads) *
 * mask_stride_h + i * Tk + j, so a mask broadcast over batch or heads needs no copy. Causal
 * masking is top-left aligned like PyTorch's is_causal: query i sees keys j <= i. A row that sees
 * no key (all masked) outputs zeros, as PyTorch's safe softmax does. */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain.h"
#include "fast_exp.h"

#define BLOCK_Q 64

typedef struct {
  const float *q, *k, *v, *mask, *out, *lse, *gout;
  float *o, *l, *gq, *gk, *gv;
  int64_t bh, heads, tq, tk, d, dv, mask_stride_b, mask_stride_h;
  float scale, dropout_p;
  int32_t causal;
  uint64_t seed, offset;
  int status; /* set to DT_ENOMEM by a task whose scratch could not be allocated */
} attention_t;

/* Keys that query row i may see at all: causal rows stop at the diagonal. */
static inline int64_t visible_keys(const attention_t *a, int64_t i) {
  if (!a->causal) return a->tk;
  return i + 1 < a->tk ? i + 1 : a->tk;
}

/* s[r, j] = scale * q_r . k_j + mask for the block's rows [i0, i0 + rows), keys [0, kmax); keys a
 * causal row may not see get -inf. */
static void block_scores(const attention_t *a, int64_t b, int64_t i0, int64_t rows, int64_t kmax,
                         float *s) {
  const float *qb = a->q + (b * a->tq + i0) * a->d;
  const float *kb = a->k + b * a->tk * a->d;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)rows, (blasint)kmax,
              (blasint)a->d, a->scale, qb, (blasint)a->d, kb, (blasint)a->d, 0.0f, s,
              (blasint)kmax);
  const float *mask = NULL;
  if (a->mask) {
    mask = a->mask + (b / a->heads) * a->mask_stride_b + (b % a->heads) * a->mask_stride_h;
  }
  for (int64_t r = 0; r < rows; r++) {
    float *row = s + r * kmax;
    int64_t i = i0 + r;
    if (mask) {
      const float *m = mask + i * a->tk;
      for (int64_t j = 0; j < kmax; j++) row[j] += m[j];
    }
    for (int64_t j = visible_keys(a, i); j < kmax; j++) row[j] = -INFINITY;
  }
}

/* The dropout multiplier of probability (b, i, j): 0, or 1 / (1 - p) for kept entries. */
static inline float keep_scale(const attention_t *a, int64_t b, int64_t i, int64_t j) {
  uint64_t counter = a->offset + (uint64_t)((b * a->tq + i) * a->tk + j);
  return dt_uniform01(a->seed, counter) >= a->dropout_p ? 1.0f / (1.0f - a->dropout_p) : 0.0f;
}

/* Turns the block's scores into probabilities (before dropout) from each row's log-sum-exp. */
static void block_probabilities(int64_t rows, int64_t kmax, const float *lse, float *s) {
  for (int64_t r = 0; r < rows; r++) {
    float *row = s + r * kmax;
    float l = lse[r];
    if (isinf(l) && l < 0) {
      memset(row, 0, (size_t)kmax * sizeof(float));
      continue;
    }
    dt_exp_shift_sum(row, row, kmax, l);
  }
}

/* dst = src * keep / (1 - p), the dropout the forward applied to these probabilities. */
static void block_dropout(const attention_t *a, int64_t b, int64_t i0, int64_t rows, int64_t kmax,
                          const float *src, float *dst) {
  for (int64_t r = 0; r < rows; r++) {
    for (int64_t j = 0; j < kmax; j++) {
      dst[r * kmax + j] = src[r * kmax + j] * keep_scale(a, b, i0 + r, j);
    }
  }
}

/* Keys the block needs: the causal triangle ends at its last row's diagonal. */
static int64_t block_keys(const attention_t *a, int64_t i0, int64_t rows) {
  return visible_keys(a, i0 + rows - 1);
}

/* ---------------------------------------------------------------- forward */

static void forward_task(void *ctx, int64_t task) {
  attention_t *a = ctx;
  int64_t blocks = (a->tq + BLOCK_Q - 1) / BLOCK_Q;
  int64_t b = task / blocks, i0 = (task % blocks) * BLOCK_Q;
  int64_t rows = a->tq - i0 < BLOCK_Q ? a->tq - i0 : BLOCK_Q;
  int64_t kmax = block_keys(a, i0, rows);
  float *out = a->o + (b * a->tq + i0) * a->dv;
  float *lse = a->l + b * a->tq + i0;
  if (kmax == 0) {
    memset(out, 0, (size_t)(rows * a->dv) * sizeof(float));
    for (int64_t r = 0; r < rows; r++) lse[r] = -INFINITY;
    return;
  }
  float *s = malloc((size_t)(rows * kmax) * sizeof(float));
  if (!s) {
    a->status = DT_ENOMEM;
    return;
  }
  block_scores(a, b, i0, rows, kmax, s);
  for (int64_t r = 0; r < rows; r++) {
    float *row = s + r * kmax;
    float max = -INFINITY;
    for (int64_t j = 0; j < kmax; j++) max = row[j] > max ? row[j] : max;
    if (isinf(max) && max < 0) {
      lse[r] = -INFINITY;
      memset(row, 0, (size_t)kmax * sizeof(float));
      continue;
    }
    double sum = dt_exp_shift_sum(row, row, kmax, max);
    lse[r] = max + logf((float)sum);
    float inv = (float)(1.0 / sum);
    for (int64_t j = 0; j < kmax; j++) row[j] *= inv;
  }
  if (a->dropout_p > 0.0f) block_dropout(a, b, i0, rows, kmax, s, s);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)rows, (blasint)a->dv,
              (blasint)kmax, 1.0f, s, (blasint)kmax, a->v + b * a->tk * a->dv, (blasint)a->dv,
              0.0f, out, (blasint)a->dv);
  free(s);
}

static int check_shapes(const char *fn, const attention_t *a) {
  CHECK(a->bh >= 0 && a->heads > 0 && a->tq >= 0 && a->tk >= 0 && a->d > 0 && a->dv > 0,
        "%s: bad shape (bh %lld, heads %lld, tq %lld, tk %lld, d %lld, dv %lld)", fn,
        (long long)a->bh, (long long)a->heads, (long long)a->tq, (long long)a->tk,
        (long long)a->d, (long long)a->dv);
  CHECK(a->dropout_p >= 0.0f && a->dropout_p < 1.0f,
        "%s: dropout probability %g is outside [0, 1)", fn, (double)a->dropout_p);
  return DT_OK;
}

int dt_attention_forward(const float *q, const float *k, const float *v, const float *mask,
                         int64_t mask_stride_b, int64_t mask_stride_h, float *out, float *lse,
                         int64_t bh, int64_t heads, int64_t tq, int64_t tk, int64_t d, int64_t dv,
                         float scale, int32_t causal, float dropout_p, uint64_t seed,
                         uint64_t offset) {
  CHECK_PTR(q); CHECK_PTR(k); CHECK_PTR(v); CHECK_PTR(out); CHECK_PTR(lse);
  attention_t a = {.q = q, .k = k, .v = v, .mask = mask, .o = out, .l = lse, .bh = bh,
                   .heads = heads, .tq = tq, .tk = tk, .d = d, .dv = dv,
                   .mask_stride_b = mask_stride_b, .mask_stride_h = mask_stride_h,
                   .scale = scale, .dropout_p = dropout_p, .causal = causal, .seed = seed,
                   .offset = offset, .status = DT_OK};
  int st = check_shapes("scaledDotProductAttention", &a);
  if (st != DT_OK) return st;
  if (bh == 0 || tq == 0) return DT_OK;
  dt_parallel(bh * ((tq + BLOCK_Q - 1) / BLOCK_Q), forward_task, &a);
  if (a.status != DT_OK) return dt_fail(a.status, "scaledDotProductAttention: out of memory");
  return DT_OK;
}

/* ---------------------------------------------------------------- backward */

/* One (batch, head) whole: its key and value gradients collect over every query block, so blocks
 * of one head run in order on one thread and heads run in parallel.
 *
 * With P the probabilities, M the dropout multipliers and Pd = P * M what the forward used:
 * dPd = go v^T, dS = P * (dPd * M - delta) with delta_i = sum_j Pd_ij dPd_ij = go_i . o_i, which
 * is Pd * dPd - P * delta: no multiplier needs dividing out. */
static void backward_task(void *ctx, int64_t b) {
  attention_t *a = ctx;
  int64_t tk = a->tk, d = a->d, dv = a->dv;
  float *gk = a->gk + b * tk * d, *gv = a->gv + b * tk * dv;
  memset(gk, 0, (size_t)(tk * d) * sizeof(float));
  memset(gv, 0, (size_t)(tk * dv) * sizeof(float));
  int64_t rows_max = a->tq < BLOCK_Q ? a->tq : BLOCK_Q;
  int64_t bufs = a->dropout_p > 0.0f ? 3 : 2;
  float *p = malloc((size_t)(bufs * rows_max * tk + rows_max + 1) * sizeof(float));
  if (!p) {
    a->status = DT_ENOMEM;
    return;
  }
  float *dp = p + rows_max * tk;
  float *pd = bufs == 3 ? dp + rows_max * tk : p;
  float *delta = p + bufs * rows_max * tk;
  const float *kb = a->k + b * tk * d, *vb = a->v + b * tk * dv;
  for (int64_t i0 = 0; i0 < a->tq; i0 += BLOCK_Q) {
    int64_t rows = a->tq - i0 < BLOCK_Q ? a->tq - i0 : BLOCK_Q;
    int64_t kmax = block_keys(a, i0, rows);
    const float *qb = a->q + (b * a->tq + i0) * d;
    const float *go = a->gout + (b * a->tq + i0) * dv, *o = a->out + (b * a->tq + i0) * dv;
    float *gq = a->gq + (b * a->tq + i0) * d;
    if (kmax == 0) {
      memset(gq, 0, (size_t)(rows * d) * sizeof(float));
      continue;
    }
    block_scores(a, b, i0, rows, kmax, p);
    block_probabilities(rows, kmax, a->lse + b * a->tq + i0, p);
    if (pd != p) block_dropout(a, b, i0, rows, kmax, p, pd);
    /* gv += pd^T go */
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (blasint)kmax, (blasint)dv,
                (blasint)rows, 1.0f, pd, (blasint)kmax, go, (blasint)dv, 1.0f, gv, (blasint)dv);
    /* dp = go v^T */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)rows, (blasint)kmax,
                (blasint)dv, 1.0f, go, (blasint)dv, vb, (blasint)dv, 0.0f, dp, (blasint)kmax);
    for (int64_t r = 0; r < rows; r++) {
      double acc = 0.0;
      for (int64_t c = 0; c < dv; c++) acc += (double)go[r * dv + c] * o[r * dv + c];
      delta[r] = (float)acc;
    }
    /* dp becomes dS */
    for (int64_t r = 0; r < rows; r++) {
      const float *pr = p + r * kmax, *pdr = pd + r * kmax;
      float *dr = dp + r * kmax;
      for (int64_t j = 0; j < kmax; j++) dr[j] = pdr[j] * dr[j] - pr[j] * delta[r];
    }
    /* gq = scale * dS k; gk += scale * dS^T q */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)rows, (blasint)d,
                (blasint)kmax, a->scale, dp, (blasint)kmax, kb, (blasint)d, 0.0f, gq, (blasint)d);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (blasint)kmax, (blasint)d,
                (blasint)rows, a->scale, dp, (blasint)kmax, qb, (blasint)d, 1.0f, gk, (blasint)d);
  }
  free(p);
}

int dt_attention_backward(const float *q, const float *k, const float *v, const float *mask,
                          int64_t mask_stride_b, int64_t mask_stride_h, const float *out,
                          const float *lse, const float *gout, float *gq, float *gk, float *gv,
                          int64_t bh, int64_t heads, int64_t tq, int64_t tk, int64_t d, int64_t dv,
                          float scale, int32_t causal, float dropout_p, uint64_t seed,
                          uint64_t offset) {
  CHECK_PTR(q); CHECK_PTR(k); CHECK_PTR(v); CHECK_PTR(out); CHECK_PTR(lse); CHECK_PTR(gout);
  CHECK_PTR(gq); CHECK_PTR(gk); CHECK_PTR(gv);
  attention_t a = {.q = q, .k = k, .v = v, .mask = mask, .out = out, .lse = lse, .gout = gout,
                   .gq = gq, .gk = gk, .gv = gv, .bh = bh, .heads = heads, .tq = tq, .tk = tk,
                   .d = d, .dv = dv, .mask_stride_b = mask_stride_b,
                   .mask_stride_h = mask_stride_h, .scale = scale, .dropout_p = dropout_p,
                   .causal = causal, .seed = seed, .offset = offset, .status = DT_OK};
  int st = check_shapes("scaledDotProductAttention backward", &a);
  if (st != DT_OK) return st;
  if (bh == 0) return DT_OK;
  if (tq == 0) {
    memset(gk, 0, (size_t)(bh * tk * d) * sizeof(float));
    memset(gv, 0, (size_t)(bh * tk * dv) * sizeof(float));
    return DT_OK;
  }
  dt_parallel(bh, backward_task, &a);
  if (a.status != DT_OK) {
    return dt_fail(a.status, "scaledDotProductAttention backward: out of memory");
  }
  return DT_OK;
}
