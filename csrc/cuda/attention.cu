/* Scaled dot-product attention, forward and backward, with csrc/core/attention.c's prototypes,
 * layout and results: q [BH, Tq, D], k [BH, Tk, D], v [BH, Tk, Dv], out [BH, Tq, Dv], and the
 * saved log-sum-exp of each query row [BH, Tq] from which the backward recomputes the
 * probabilities. This is the straightforward version: the scores of a group of heads are
 * materialised ([heads, Tq, Tk] in scratch, at most SCRATCH_BYTES at a time) and the products
 * are strided batched cuBLAS calls (bf16 under that matmul precision); the softmax, mask, causal
 * triangle and dropout (the counter RNG at the CPU's counters) run in row kernels. */
#include "internal.cuh"

#define SCRATCH_BYTES ((int64_t)512 << 20)

typedef struct {
  const float *mask;
  int64_t mask_stride_b, mask_stride_h, heads, tq, tk;
  int32_t causal;
  float dropout_p;
  uint64_t seed, offset;
} attn_t;

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
  return dt_uniform01(a.seed, counter) >= a.dropout_p ? 1.0f / (1.0f - a.dropout_p) : 0.0f;
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
__global__ void backward_ds(attn_t a, int64_t b0, const float *p, const float *pd, float *dp,
                            const float *go, const float *o, int64_t dv) {
  __shared__ float shared[32];
  int64_t row = blockIdx.x, at = (b0 * a.tq + row) * dv;
  float acc = 0.0f;
  for (int64_t c = threadIdx.x; c < dv; c += blockDim.x) acc += go[at + c] * o[at + c];
  float delta = block_sum(acc, shared);
  for (int64_t j = threadIdx.x; j < a.tk; j += blockDim.x) {
    int64_t e = row * a.tk + j;
    dp[e] = pd[e] * dp[e] - p[e] * delta;
  }
}

__global__ void fill_value(float *dst, int64_t n, float v) {
  GRID_LOOP(i, n) dst[i] = v;
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

/* Heads per group so that `bufs` score buffers of the group fit SCRATCH_BYTES (at least 1). */
static int64_t group_heads(int64_t bh, int64_t tq, int64_t tk, int bufs) {
  int64_t per_head = bufs * tq * tk * (int64_t)sizeof(float);
  int64_t g = per_head > 0 ? SCRATCH_BYTES / per_head : bh;
  if (g < 1) g = 1;
  if (g * tq > 0x7fffffff) g = 0x7fffffff / tq;
  return g < bh ? g : bh;
}

DT_EXPORT int dt_attention_forward(const float *q, const float *k, const float *v,
                                   const float *mask, int64_t mask_stride_b, int64_t mask_stride_h,
                                   float *out, float *lse, int64_t bh, int64_t heads, int64_t tq,
                                   int64_t tk, int64_t d, int64_t dv, float scale, int32_t causal,
                                   float dropout_p, uint64_t seed, uint64_t offset) {
  CHECK_PTR(q); CHECK_PTR(k); CHECK_PTR(v); CHECK_PTR(out); CHECK_PTR(lse);
  int st = check_shapes("scaledDotProductAttention", bh, heads, tq, tk, d, dv, dropout_p);
  if (st != DT_OK) return st;
  CURRENT(dev);
  if (bh == 0 || tq == 0) return DT_OK;
  if (tk == 0) {
    LAUNCH(dev, bh * tq * dv, fill_value, out, bh * tq * dv, 0.0f);
    LAUNCH(dev, bh * tq, fill_value, lse, bh * tq, -INFINITY);
    return DT_OK;
  }
  attn_t a = {mask, mask_stride_b, mask_stride_h, heads, tq, tk, causal, dropout_p, seed, offset};
  int64_t group = group_heads(bh, tq, tk, 1);
  float *s;
  if ((st = dt_cuda_scratch(dev, group * tq * tk * (int64_t)sizeof(float), (void **)&s)) != DT_OK)
    return st;
  for (int64_t b0 = 0; b0 < bh && st == DT_OK; b0 += group) {
    int64_t g = bh - b0 < group ? bh - b0 : group;
    st = dt_cuda_gemm(dev, 0, 1, tq, tk, d, scale, q + b0 * tq * d, d, tq * d, k + b0 * tk * d, d,
                      tk * d, 0.0f, s, tk, tq * tk, g);
    if (st != DT_OK) break;
    forward_rows<<<(unsigned)(g * tq), THREADS, 0, dev->compute>>>(a, b0, s, lse);
    if (cudaPeekAtLastError() != cudaSuccess) break;
    st = dt_cuda_gemm(dev, 0, 0, tq, dv, tk, 1.0f, s, tk, tq * tk, v + b0 * tk * dv, dv, tk * dv,
                      0.0f, out + b0 * tq * dv, dv, tq * dv, g);
  }
  dt_cuda_scratch_free(dev, s);
  if (st != DT_OK) return st;
  LAUNCH_CHECK();
  return DT_OK;
}

DT_EXPORT int dt_attention_backward(const float *q, const float *k, const float *v,
                                    const float *mask, int64_t mask_stride_b,
                                    int64_t mask_stride_h, const float *out, const float *lse,
                                    const float *gout, float *gq, float *gk, float *gv, int64_t bh,
                                    int64_t heads, int64_t tq, int64_t tk, int64_t d, int64_t dv,
                                    float scale, int32_t causal, float dropout_p, uint64_t seed,
                                    uint64_t offset) {
  CHECK_PTR(q); CHECK_PTR(k); CHECK_PTR(v); CHECK_PTR(out); CHECK_PTR(lse); CHECK_PTR(gout);
  CHECK_PTR(gq); CHECK_PTR(gk); CHECK_PTR(gv);
  int st = check_shapes("scaledDotProductAttention backward", bh, heads, tq, tk, d, dv, dropout_p);
  if (st != DT_OK) return st;
  CURRENT(dev);
  if (bh == 0) return DT_OK;
  if (tq == 0 || tk == 0) {
    if (tk > 0) LAUNCH(dev, bh * tk * d, fill_value, gk, bh * tk * d, 0.0f);
    if (tk > 0) LAUNCH(dev, bh * tk * dv, fill_value, gv, bh * tk * dv, 0.0f);
    if (tq > 0) LAUNCH(dev, bh * tq * d, fill_value, gq, bh * tq * d, 0.0f);
    return DT_OK;
  }
  attn_t a = {mask, mask_stride_b, mask_stride_h, heads, tq, tk, causal, dropout_p, seed, offset};
  int bufs = dropout_p > 0.0f ? 3 : 2;
  int64_t group = group_heads(bh, tq, tk, bufs), elems = group * tq * tk;
  float *p;
  if ((st = dt_cuda_scratch(dev, bufs * elems * (int64_t)sizeof(float), (void **)&p)) != DT_OK)
    return st;
  float *dp = p + elems, *pd = bufs == 3 ? dp + elems : p;
  for (int64_t b0 = 0; b0 < bh && st == DT_OK; b0 += group) {
    int64_t g = bh - b0 < group ? bh - b0 : group;
    const float *qb = q + b0 * tq * d, *kb = k + b0 * tk * d, *vb = v + b0 * tk * dv;
    const float *go = gout + b0 * tq * dv;
    /* p = scale q k^T, then the probabilities */
    st = dt_cuda_gemm(dev, 0, 1, tq, tk, d, scale, qb, d, tq * d, kb, d, tk * d, 0.0f, p, tk,
                      tq * tk, g);
    if (st != DT_OK) break;
    backward_probs<<<(unsigned)(g * tq), THREADS, 0, dev->compute>>>(a, b0, p, pd, lse);
    /* gv = pd^T go; dp = go v^T */
    if ((st = dt_cuda_gemm(dev, 1, 0, tk, dv, tq, 1.0f, pd, tk, tq * tk, go, dv, tq * dv, 0.0f,
                           gv + b0 * tk * dv, dv, tk * dv, g)) != DT_OK)
      break;
    if ((st = dt_cuda_gemm(dev, 0, 1, tq, tk, dv, 1.0f, go, dv, tq * dv, vb, dv, tk * dv, 0.0f, dp,
                           tk, tq * tk, g)) != DT_OK)
      break;
    backward_ds<<<(unsigned)(g * tq), THREADS, 0, dev->compute>>>(a, b0, p, pd, dp, gout, out, dv);
    /* gq = scale dS k; gk = scale dS^T q */
    if ((st = dt_cuda_gemm(dev, 0, 0, tq, d, tk, scale, dp, tk, tq * tk, kb, d, tk * d, 0.0f,
                           gq + b0 * tq * d, d, tq * d, g)) != DT_OK)
      break;
    st = dt_cuda_gemm(dev, 1, 0, tk, d, tq, scale, dp, tk, tq * tk, qb, d, tq * d, 0.0f,
                      gk + b0 * tk * d, d, tk * d, g);
  }
  dt_cuda_scratch_free(dev, p);
  if (st != DT_OK) return st;
  LAUNCH_CHECK();
  return DT_OK;
}
