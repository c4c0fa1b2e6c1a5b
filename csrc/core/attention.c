/* Fused scaled dot-product attention, forward and backward, after FlashAttention: the forward
 * saves only each query row's log-sum-exp, and the backward recomputes the probabilities from it,
 * so nothing of size [T, T] lives between the two. Work is cut into blocks of query rows; each
 * block's scores sit in a scratch of BLOCK_Q x Tk floats while the block is processed, and the
 * products run through single-threaded cblas_sgemm calls on the thread pool.
 *
 * Layout: q [BH, Tq, D], k [BH, Tk, D], v [BH, Tk, Dv], out [BH, Tq, Dv] and the gradients are
 * strided views: element (bh, t, c) of tensor X sits at (bh / heads) * X.sb + (bh % heads) * X.sh
 * + t * X.st + c, with the strides in `layout` (see dt_attention_layout), so heads packed side by
 * side in one [B, T, 3C] projection are read and written in place, with no copies. lse [BH, Tq]
 * is contiguous. The optional additive mask is indexed the same way with row stride Tk, so a mask
 * broadcast over batch or heads (stride 0) needs no copy. Causal
 * masking is top-left aligned like PyTorch's is_causal: query i sees keys j <= i. A row that sees
 * no key (all masked) outputs zeros, as PyTorch's safe softmax does. */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dtrain.h"
#include "fast_exp.h"
#include "scalar_math.h"

#define BLOCK_Q 64

/* Strides of one tensor (in floats): per batch, per head, per row; elements of a row are adjacent. */
typedef struct {
  int64_t sb, sh, st;
} strides_t;

/* The order of the strides in the `layout` array the entry points take. */
enum { L_Q, L_K, L_V, L_OUT, L_GOUT, L_GQ, L_GK, L_GV, L_COUNT };

typedef struct {
  const float *q, *k, *v, *mask, *out, *lse, *gout;
  float *o, *l, *gq, *gk, *gv;
  strides_t st[L_COUNT];
  int64_t bh, heads, tq, tk, d, dv, mask_stride_b, mask_stride_h;
  float scale, dropout_p;
  int32_t causal;
  uint64_t seed, offset;
  int status; /* set to DT_ENOMEM by a task whose scratch could not be allocated */
} attention_t;

/* The offset of head bh's first row in a tensor with strides x. */
static inline int64_t head_offset(const attention_t *a, int which, int64_t bh) {
  const strides_t *x = &a->st[which];
  return (bh / a->heads) * x->sb + (bh % a->heads) * x->sh;
}

/* Keys that query row i may see at all: causal rows stop at the diagonal. */
static inline int64_t visible_keys(const attention_t *a, int64_t i) {
  if (!a->causal) return a->tk;
  return i + 1 < a->tk ? i + 1 : a->tk;
}

/* s[r, j] = scale * q_r . k_j + mask for the block's rows [i0, i0 + rows), keys [0, kmax); keys a
 * causal row may not see get -inf. */
static void block_scores(const attention_t *a, int64_t b, int64_t i0, int64_t rows, int64_t kmax,
                         float *s) {
  const float *qb = a->q + head_offset(a, L_Q, b) + i0 * a->st[L_Q].st;
  const float *kb = a->k + head_offset(a, L_K, b);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)rows, (blasint)kmax,
              (blasint)a->d, a->scale, qb, (blasint)a->st[L_Q].st, kb, (blasint)a->st[L_K].st,
              0.0f, s, (blasint)kmax);
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
  return dt_dropout_keeps(a->seed, counter, a->dropout_p) ? 1.0f / (1.0f - a->dropout_p) : 0.0f;
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
  int64_t ld_out = a->st[L_OUT].st;
  float *out = a->o + head_offset(a, L_OUT, b) + i0 * ld_out;
  float *lse = a->l + b * a->tq + i0;
  if (kmax == 0) {
    for (int64_t r = 0; r < rows; r++) {
      memset(out + r * ld_out, 0, (size_t)a->dv * sizeof(float));
      lse[r] = -INFINITY;
    }
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
              (blasint)kmax, 1.0f, s, (blasint)kmax, a->v + head_offset(a, L_V, b),
              (blasint)a->st[L_V].st, 0.0f, out, (blasint)ld_out);
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

/* Reads the strides of the tensors an entry point uses from `layout`: 3 per tensor (batch, head,
 * row) in the order q, k, v, out, gout, gq, gk, gv, then the mask's batch and head strides. */
static int read_layout(attention_t *a, const int64_t *layout, int tensors) {
  CHECK(layout != NULL, "scaledDotProductAttention: layout is NULL");
  for (int x = 0; x < tensors; x++) {
    a->st[x] = (strides_t){layout[3 * x], layout[3 * x + 1], layout[3 * x + 2]};
  }
  a->mask_stride_b = layout[3 * L_COUNT];
  a->mask_stride_h = layout[3 * L_COUNT + 1];
  return DT_OK;
}

int dt_attention_forward(const float *q, const float *k, const float *v, const float *mask,
                         float *out, float *lse, const int64_t *layout, int64_t bh, int64_t heads,
                         int64_t tq, int64_t tk, int64_t d, int64_t dv, float scale,
                         int32_t causal, float dropout_p, uint64_t seed, uint64_t offset) {
  CHECK_PTR(q); CHECK_PTR(k); CHECK_PTR(v); CHECK_PTR(out); CHECK_PTR(lse);
  attention_t a = {.q = q, .k = k, .v = v, .mask = mask, .o = out, .l = lse, .bh = bh,
                   .heads = heads, .tq = tq, .tk = tk, .d = d, .dv = dv, .scale = scale,
                   .dropout_p = dropout_p, .causal = causal, .seed = seed, .offset = offset,
                   .status = DT_OK};
  int st = check_shapes("scaledDotProductAttention", &a);
  if (st == DT_OK) st = read_layout(&a, layout, L_OUT + 1);
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
  int64_t ld_q = a->st[L_Q].st, ld_k = a->st[L_K].st, ld_v = a->st[L_V].st;
  int64_t ld_o = a->st[L_OUT].st, ld_go = a->st[L_GOUT].st, ld_gq = a->st[L_GQ].st;
  int64_t ld_gk = a->st[L_GK].st, ld_gv = a->st[L_GV].st;
  float *gk = a->gk + head_offset(a, L_GK, b), *gv = a->gv + head_offset(a, L_GV, b);
  for (int64_t r = 0; r < tk; r++) {
    memset(gk + r * ld_gk, 0, (size_t)d * sizeof(float));
    memset(gv + r * ld_gv, 0, (size_t)dv * sizeof(float));
  }
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
  const float *kb = a->k + head_offset(a, L_K, b), *vb = a->v + head_offset(a, L_V, b);
  for (int64_t i0 = 0; i0 < a->tq; i0 += BLOCK_Q) {
    int64_t rows = a->tq - i0 < BLOCK_Q ? a->tq - i0 : BLOCK_Q;
    int64_t kmax = block_keys(a, i0, rows);
    const float *qb = a->q + head_offset(a, L_Q, b) + i0 * ld_q;
    const float *go = a->gout + head_offset(a, L_GOUT, b) + i0 * ld_go;
    const float *o = a->out + head_offset(a, L_OUT, b) + i0 * ld_o;
    float *gq = a->gq + head_offset(a, L_GQ, b) + i0 * ld_gq;
    if (kmax == 0) {
      for (int64_t r = 0; r < rows; r++) memset(gq + r * ld_gq, 0, (size_t)d * sizeof(float));
      continue;
    }
    block_scores(a, b, i0, rows, kmax, p);
    block_probabilities(rows, kmax, a->lse + b * a->tq + i0, p);
    if (pd != p) block_dropout(a, b, i0, rows, kmax, p, pd);
    /* gv += pd^T go */
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (blasint)kmax, (blasint)dv,
                (blasint)rows, 1.0f, pd, (blasint)kmax, go, (blasint)ld_go, 1.0f, gv,
                (blasint)ld_gv);
    /* dp = go v^T */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)rows, (blasint)kmax,
                (blasint)dv, 1.0f, go, (blasint)ld_go, vb, (blasint)ld_v, 0.0f, dp,
                (blasint)kmax);
    for (int64_t r = 0; r < rows; r++) {
      double acc = 0.0;
      for (int64_t c = 0; c < dv; c++) acc += (double)go[r * ld_go + c] * o[r * ld_o + c];
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
                (blasint)kmax, a->scale, dp, (blasint)kmax, kb, (blasint)ld_k, 0.0f, gq,
                (blasint)ld_gq);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (blasint)kmax, (blasint)d,
                (blasint)rows, a->scale, dp, (blasint)kmax, qb, (blasint)ld_q, 1.0f, gk,
                (blasint)ld_gk);
  }
  free(p);
}

int dt_attention_backward(const float *q, const float *k, const float *v, const float *mask,
                          const float *out, const float *lse, const float *gout, float *gq,
                          float *gk, float *gv, const int64_t *layout, int64_t bh, int64_t heads,
                          int64_t tq, int64_t tk, int64_t d, int64_t dv, float scale,
                          int32_t causal, float dropout_p, uint64_t seed, uint64_t offset) {
  CHECK_PTR(q); CHECK_PTR(k); CHECK_PTR(v); CHECK_PTR(out); CHECK_PTR(lse); CHECK_PTR(gout);
  CHECK_PTR(gq); CHECK_PTR(gk); CHECK_PTR(gv);
  attention_t a = {.q = q, .k = k, .v = v, .mask = mask, .out = out, .lse = lse, .gout = gout,
                   .gq = gq, .gk = gk, .gv = gv, .bh = bh, .heads = heads, .tq = tq, .tk = tk,
                   .d = d, .dv = dv, .scale = scale, .dropout_p = dropout_p, .causal = causal,
                   .seed = seed, .offset = offset, .status = DT_OK};
  int st = check_shapes("scaledDotProductAttention backward", &a);
  if (st == DT_OK) st = read_layout(&a, layout, L_COUNT);
  if (st != DT_OK) return st;
  if (bh == 0) return DT_OK;
  /* tq == 0 still runs the tasks: they zero the key and value gradients. */
  dt_parallel(bh, backward_task, &a);
  if (a.status != DT_OK) {
    return dt_fail(a.status, "scaledDotProductAttention backward: out of memory");
  }
  return DT_OK;
}
