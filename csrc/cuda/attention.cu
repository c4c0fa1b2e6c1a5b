/* Scaled dot-product attention, forward and backward, with csrc/core/attention.c's prototypes,
 * layout and results: q [BH, Tq, D], k [BH, Tk, D], v [BH, Tk, Dv], out [BH, Tq, Dv] and the
 * gradients are strided views (element (bh, t, c) of X at (bh / heads) * X.sb + (bh % heads) *
 * X.sh + t * X.st + c, the strides in `layout`), so heads packed in one [B, T, 3C] projection are
 * used in place; the log-sum-exp of each query row [BH, Tq] is contiguous, and the backward
 * recomputes the probabilities from it. This is the straightforward version: the scores of a
 * group of heads of one batch element are materialised ([heads, Tq, Tk] in scratch, at most
 * SCRATCH_BYTES at a time) and the products are strided batched cuBLAS calls over the heads (bf16
 * under that matmul precision); the softmax, mask, causal triangle and dropout (the counter RNG
 * at the CPU's counters) run in row kernels. */
#include "internal.cuh"

#define SCRATCH_BYTES ((int64_t)512 << 20)

typedef struct {
  const float *mask;
  int64_t mask_stride_b, mask_stride_h, heads, tq, tk;
  int32_t causal;
  float dropout_p;
  uint64_t seed, offset;
} attn_t;

/* Strides of one tensor (in floats): per batch element, per head, per row. */
typedef struct {
  int64_t sb, sh, st;
} strides_t;
/* The order of the strides in `layout` (csrc/core/attention.c's), then the mask's two. */
enum { L_Q, L_K, L_V, L_OUT, L_GOUT, L_GQ, L_GK, L_GV, L_COUNT };

/* The score's additive terms for (b, i, j): the mask, and -inf past the causal diagonal. */
__device__ __forceinline__ float bias_of(const attn_t &a, int64_t b, int64_t i, int64_t j) {
  if (a.causal && j > i) return -INFINITY;
  if (a.mask == NULL) return 0.0f;
  return a.mask[(b / a.heads) * a.mask_stride_b + (b % a.heads) * a.mask_stride_h + i * a.tk + j];
}

/* The dropout multiplier of probability (b, i, j): csrc/core's keep_scale. */
__device__ __forceinline__ float keep_of(const attn_t &a, int64_t b, int64_t i, int64_t j) {
  if (a.dropout_p <= 0.0f) return 1.0f;
  uint64_t counter = a.offset + (uint64_t)((b * a.tq + i) * a.tk + j);
  return dt_dropout_keeps(a.seed, counter, a.dropout_p) ? 1.0f / (1.0f - a.dropout_p) : 0.0f;
}

/* One block per query row of heads [b0, b0 + gridDim.x / tq): scores become dropped-out
 * probabilities in place, and the row's log-sum-exp is saved (-inf, zeros: a row that sees no key). */
__global__ void forward_rows(attn_t a, int64_t b0, float *s, float *lse) {
  __shared__ float shared[32];
  int64_t row = blockIdx.x, b = b0 + row / a.tq, i = row % a.tq;
  float *sr = s + row * a.tk;
  float max = -INFINITY;
  for (int64_t j = threadIdx.x; j < a.tk; j += blockDim.x) {
    float v = sr[j] + bias_of(a, b, i, j);
    sr[j] = v;
    max = fmaxf(max, v);
  }
  max = block_max(max, shared);
  if (max == -INFINITY) {
    for (int64_t j = threadIdx.x; j < a.tk; j += blockDim.x) sr[j] = 0.0f;
    if (threadIdx.x == 0) lse[b * a.tq + i] = -INFINITY;
    return;
  }
  float sum = 0.0f;
  for (int64_t j = threadIdx.x; j < a.tk; j += blockDim.x) sum += expf(sr[j] - max);
  float l = max + logf(block_sum(sum, shared));
  for (int64_t j = threadIdx.x; j < a.tk; j += blockDim.x) sr[j] = expf(sr[j] - l) * keep_of(a, b, i, j);
  if (threadIdx.x == 0) lse[b * a.tq + i] = l;
}

/* Backward: the probabilities p from the saved log-sum-exp, and their dropped-out pd (pd may be p). */
__global__ void backward_probs(attn_t a, int64_t b0, float *p, float *pd, const float *lse) {
  int64_t row = blockIdx.x, b = b0 + row / a.tq, i = row % a.tq;
  float l = lse[b * a.tq + i];
  for (int64_t j = threadIdx.x; j < a.tk; j += blockDim.x) {
    int64_t at = row * a.tk + j;
    float v = l == -INFINITY ? 0.0f : expf(p[at] + bias_of(a, b, i, j) - l);
    p[at] = v;
    if (pd != p) pd[at] = v * keep_of(a, b, i, j);
  }
}

/* dp becomes dS = pd * dp - p * delta, delta = go . o of the row (attention.c's derivation). */
__global__ void backward_ds(attn_t a, const float *p, const float *pd, float *dp, const float *go,
                            strides_t gos, const float *o, strides_t os, int64_t dv) {
  __shared__ float shared[32];
  int64_t row = blockIdx.x, hh = row / a.tq, i = row % a.tq;
  const float *gr = go + hh * gos.sh + i * gos.st, *orow = o + hh * os.sh + i * os.st;
  float acc = 0.0f;
  for (int64_t c = threadIdx.x; c < dv; c += blockDim.x) acc += gr[c] * orow[c];
  float delta = block_sum(acc, shared);
  for (int64_t j = threadIdx.x; j < a.tk; j += blockDim.x) {
    int64_t e = row * a.tk + j;
    dp[e] = pd[e] * dp[e] - p[e] * delta;
  }
}

/* Sets every element of a strided [bh, rows, cols] tensor to v (rows that see no key). */
__global__ void fill_strided(float *dst, strides_t s, int64_t heads, int64_t bh, int64_t rows,
                             int64_t cols, float v) {
  GRID_LOOP(t, bh * rows * cols) {
    int64_t c = t % cols, r = (t / cols) % rows, b = t / (cols * rows);
    dst[(b / heads) * s.sb + (b % heads) * s.sh + r * s.st + c] = v;
  }
}

static void read_layout(const int64_t *layout, int tensors, strides_t *st, attn_t *a) {
  for (int x = 0; x < tensors; x++) st[x] = {layout[3 * x], layout[3 * x + 1], layout[3 * x + 2]};
  a->mask_stride_b = layout[3 * L_COUNT];
  a->mask_stride_h = layout[3 * L_COUNT + 1];
}

/* The first element of head h of batch element b in a tensor with strides s. */
static inline const float *at(const float *x, const strides_t &s, int64_t b, int64_t h) {
  return x + b * s.sb + h * s.sh;
}

static int check_shapes(const char *fn, int64_t bh, int64_t heads, int64_t tq, int64_t tk,
                        int64_t d, int64_t dv, float dropout_p) {
  CHECK(bh >= 0 && heads > 0 && tq >= 0 && tk >= 0 && d > 0 && dv > 0,
        "%s: bad shape (bh %lld, heads %lld, tq %lld, tk %lld, d %lld, dv %lld)", fn,
        (long long)bh, (long long)heads, (long long)tq, (long long)tk, (long long)d, (long long)dv);
  CHECK(dropout_p >= 0.0f && dropout_p < 1.0f, "%s: dropout probability %g is outside [0, 1)", fn,
        (double)dropout_p);
  return DT_OK;
}

/* Heads per group (of one batch element) so that `bufs` score buffers fit SCRATCH_BYTES. */
static int64_t group_heads(int64_t heads, int64_t tq, int64_t tk, int bufs) {
  int64_t per_head = bufs * tq * tk * (int64_t)sizeof(float);
  int64_t g = per_head > 0 ? SCRATCH_BYTES / per_head : heads;
  if (g < 1) g = 1;
  if (g * tq > 0x7fffffff) g = 0x7fffffff / tq;
  return g < heads ? g : heads;
}

DT_EXPORT int dt_attention_forward(const float *q, const float *k, const float *v,
                                   const float *mask, float *out, float *lse,
                                   const int64_t *layout, int64_t bh, int64_t heads, int64_t tq,
                                   int64_t tk, int64_t d, int64_t dv, float scale, int32_t causal,
                                   float dropout_p, uint64_t seed, uint64_t offset) {
  CHECK_PTR(q); CHECK_PTR(k); CHECK_PTR(v); CHECK_PTR(out); CHECK_PTR(lse);
  CHECK(layout != NULL, "scaledDotProductAttention: layout is NULL");
  int st = check_shapes("scaledDotProductAttention", bh, heads, tq, tk, d, dv, dropout_p);
  if (st != DT_OK) return st;
  attn_t a = {mask, 0, 0, heads, tq, tk, causal, dropout_p, seed, offset};
  strides_t s[L_COUNT];
  read_layout(layout, L_OUT + 1, s, &a);
  CURRENT(dev);
  if (bh == 0 || tq == 0) return DT_OK;
  if (tk == 0) {
    LAUNCH(dev, bh * tq * dv, fill_strided, out, s[L_OUT], heads, bh, tq, dv, 0.0f);
    LAUNCH(dev, bh * tq, fill_strided, lse, strides_t{heads * tq, tq, 1}, heads, bh, tq, 1, -INFINITY);
    return DT_OK;
  }
  int64_t group = group_heads(heads, tq, tk, 1);
  float *sc;
  if ((st = dt_cuda_scratch(dev, group * tq * tk * (int64_t)sizeof(float), (void **)&sc)) != DT_OK)
    return st;
  for (int64_t b = 0; b < bh / heads && st == DT_OK; b++) {
    for (int64_t h0 = 0; h0 < heads && st == DT_OK; h0 += group) {
      int64_t g = heads - h0 < group ? heads - h0 : group;
      st = dt_cuda_gemm(dev, 0, 1, tq, tk, d, scale, at(q, s[L_Q], b, h0), s[L_Q].st, s[L_Q].sh,
                        at(k, s[L_K], b, h0), s[L_K].st, s[L_K].sh, 0.0f, sc, tk, tq * tk, g);
      if (st != DT_OK) break;
      GRID_LAUNCH(forward_rows, (unsigned)(g * tq), THREADS, 0, dev->compute)(a, b * heads + h0, sc, lse);
      st = dt_cuda_gemm(dev, 0, 0, tq, dv, tk, 1.0f, sc, tk, tq * tk, at(v, s[L_V], b, h0),
                        s[L_V].st, s[L_V].sh, 0.0f, (float *)at(out, s[L_OUT], b, h0),
                        s[L_OUT].st, s[L_OUT].sh, g);
    }
  }
  dt_cuda_scratch_free(dev, sc);
  if (st != DT_OK) return st;
  LAUNCH_CHECK();
  return DT_OK;
}

DT_EXPORT int dt_attention_backward(const float *q, const float *k, const float *v,
                                    const float *mask, const float *out, const float *lse,
                                    const float *gout, float *gq, float *gk, float *gv,
                                    const int64_t *layout, int64_t bh, int64_t heads, int64_t tq,
                                    int64_t tk, int64_t d, int64_t dv, float scale, int32_t causal,
                                    float dropout_p, uint64_t seed, uint64_t offset) {
  CHECK_PTR(q); CHECK_PTR(k); CHECK_PTR(v); CHECK_PTR(out); CHECK_PTR(lse); CHECK_PTR(gout);
  CHECK_PTR(gq); CHECK_PTR(gk); CHECK_PTR(gv);
  CHECK(layout != NULL, "scaledDotProductAttention: layout is NULL");
  int st = check_shapes("scaledDotProductAttention backward", bh, heads, tq, tk, d, dv, dropout_p);
  if (st != DT_OK) return st;
  attn_t a = {mask, 0, 0, heads, tq, tk, causal, dropout_p, seed, offset};
  strides_t s[L_COUNT];
  read_layout(layout, L_COUNT, s, &a);
  CURRENT(dev);
  if (bh == 0) return DT_OK;
  if (tq == 0 || tk == 0) {
    if (tk > 0) LAUNCH(dev, bh * tk * d, fill_strided, gk, s[L_GK], heads, bh, tk, d, 0.0f);
    if (tk > 0) LAUNCH(dev, bh * tk * dv, fill_strided, gv, s[L_GV], heads, bh, tk, dv, 0.0f);
    if (tq > 0) LAUNCH(dev, bh * tq * d, fill_strided, gq, s[L_GQ], heads, bh, tq, d, 0.0f);
    return DT_OK;
  }
  int bufs = dropout_p > 0.0f ? 3 : 2;
  int64_t group = group_heads(heads, tq, tk, bufs), elems = group * tq * tk;
  float *p;
  if ((st = dt_cuda_scratch(dev, bufs * elems * (int64_t)sizeof(float), (void **)&p)) != DT_OK)
    return st;
  float *dp = p + elems, *pd = bufs == 3 ? dp + elems : p;
  for (int64_t b = 0; b < bh / heads && st == DT_OK; b++) {
    for (int64_t h0 = 0; h0 < heads && st == DT_OK; h0 += group) {
      int64_t g = heads - h0 < group ? heads - h0 : group;
      const float *qb = at(q, s[L_Q], b, h0), *kb = at(k, s[L_K], b, h0);
      const float *vb = at(v, s[L_V], b, h0), *go = at(gout, s[L_GOUT], b, h0);
      /* p = scale q k^T, then the probabilities */
      st = dt_cuda_gemm(dev, 0, 1, tq, tk, d, scale, qb, s[L_Q].st, s[L_Q].sh, kb, s[L_K].st,
                        s[L_K].sh, 0.0f, p, tk, tq * tk, g);
      if (st != DT_OK) break;
      GRID_LAUNCH(backward_probs, (unsigned)(g * tq), THREADS, 0, dev->compute)(a, b * heads + h0, p, pd, lse);
      /* gv = pd^T go; dp = go v^T */
      if ((st = dt_cuda_gemm(dev, 1, 0, tk, dv, tq, 1.0f, pd, tk, tq * tk, go, s[L_GOUT].st,
                             s[L_GOUT].sh, 0.0f, (float *)at(gv, s[L_GV], b, h0), s[L_GV].st,
                             s[L_GV].sh, g)) != DT_OK)
        break;
      if ((st = dt_cuda_gemm(dev, 0, 1, tq, tk, dv, 1.0f, go, s[L_GOUT].st, s[L_GOUT].sh, vb,
                             s[L_V].st, s[L_V].sh, 0.0f, dp, tk, tq * tk, g)) != DT_OK)
        break;
      GRID_LAUNCH(backward_ds, (unsigned)(g * tq), THREADS, 0, dev->compute)(
          a, p, pd, dp, go, s[L_GOUT], at(out, s[L_OUT], b, h0), s[L_OUT], dv);
      /* gq = scale dS k; gk = scale dS^T q */
      if ((st = dt_cuda_gemm(dev, 0, 0, tq, d, tk, scale, dp, tk, tq * tk, kb, s[L_K].st,
                             s[L_K].sh, 0.0f, (float *)at(gq, s[L_GQ], b, h0), s[L_GQ].st,
                             s[L_GQ].sh, g)) != DT_OK)
        break;
      st = dt_cuda_gemm(dev, 1, 0, tk, d, tq, scale, dp, tk, tq * tk, qb, s[L_Q].st, s[L_Q].sh,
                        0.0f, (float *)at(gk, s[L_GK], b, h0), s[L_GK].st, s[L_GK].sh, g);
    }
  }
  dt_cuda_scratch_free(dev, p);
  if (st != DT_OK) return st;
  LAUNCH_CHECK();
  return DT_OK;
}
