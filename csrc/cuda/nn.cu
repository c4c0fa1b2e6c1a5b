/* Neural-network kernels with csrc/core/nn.c's prototypes: softmax, log-softmax, MSE, layer norm,
 * embedding and dropout. Row kernels run one block per row. An out-of-range embedding index is
 * reported at the next synchronisation (see [Note: device-side errors] in internal.cuh). */
#include "internal.cuh"

/* ---------------------------------------------------------------- softmax */

__global__ void softmax_kernel(const float *x, float *y, int64_t cols, int log) {
  __shared__ float shared[32];
  const float *in = x + blockIdx.x * cols;
  float *out = y + blockIdx.x * cols;
  float max = -INFINITY;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) max = fmaxf(max, in[c]);
  max = block_max(max, shared);
  float sum = 0.0f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) sum += expf(in[c] - max);
  sum = block_sum(sum, shared);
  float lse = max + logf(sum), inv = 1.0f / sum;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
    out[c] = log ? in[c] - lse : expf(in[c] - max) * inv;
}

__global__ void softmax_backward_kernel(const float *y, const float *gy, float *gx, int64_t cols,
                                        int log) {
  __shared__ float shared[32];
  const float *yr = y + blockIdx.x * cols, *gr = gy + blockIdx.x * cols;
  float *out = gx + blockIdx.x * cols;
  float acc = 0.0f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) acc += log ? gr[c] : gr[c] * yr[c];
  acc = block_sum(acc, shared);
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
    out[c] = log ? gr[c] - expf(yr[c]) * acc : yr[c] * (gr[c] - acc);
}

DT_EXPORT int dt_softmax(const float *x, float *y, int64_t rows, int64_t cols, int32_t log) {
  CHECK_PTR(x); CHECK_PTR(y);
  CHECK(rows >= 0 && rows <= ROWS_MAX && cols > 0, "dt_softmax: bad shape [%lld, %lld]",
        (long long)rows, (long long)cols);
  CURRENT(dev);
  if (rows == 0) return DT_OK;
  GRID_LAUNCH(softmax_kernel, (unsigned)rows, THREADS, 0, dev->compute)(x, y, cols, log);
  LAUNCH_CHECK();
  return DT_OK;
}

DT_EXPORT int dt_softmax_backward(const float *y, const float *gy, float *gx, int64_t rows,
                                  int64_t cols, int32_t log) {
  CHECK_PTR(y); CHECK_PTR(gy); CHECK_PTR(gx);
  CHECK(rows >= 0 && rows <= ROWS_MAX && cols > 0, "dt_softmax_backward: bad shape");
  CURRENT(dev);
  if (rows == 0) return DT_OK;
  GRID_LAUNCH(softmax_backward_kernel, (unsigned)rows, THREADS, 0, dev->compute)(y, gy, gx, cols, log);
  LAUNCH_CHECK();
  return DT_OK;
}

/* ---------------------------------------------------------------- MSE */

/* Pass one of [Note: two-pass reductions]: each block's sum of squared differences, and ga. */
__global__ void mse_partials_kernel(const float *a, const float *b, int64_t n, float *ga,
                                    float *partial) {
  __shared__ float shared[32];
  float total = 0.0f, scale = 2.0f / (float)n;
  GRID_LOOP(i, n) {
    float d = a[i] - b[i];
    total += d * d;
    if (ga) ga[i] = scale * d;
  }
  total = block_sum(total, shared);
  if (threadIdx.x == 0) partial[blockIdx.x] = total;
}

/* Pass two: the mean of the squares (NaN for no elements, as csrc/core's). */
__global__ void mse_total_kernel(const float *partial, int64_t blocks, int64_t n, float *loss) {
  __shared__ float shared[32];
  float total = sum_partials(partial, blocks, shared);
  if (threadIdx.x == 0) *loss = n ? total / (float)n : NAN;
}

DT_EXPORT int dt_mse(const float *a, const float *b, int64_t n, float *loss, float *ga) {
  CHECK_PTR(a); CHECK_PTR(b); CHECK_PTR(loss); CHECK_COUNT(n);
  CURRENT(dev);
  unsigned blocks = partial_blocks(n);
  float *partial;
  int st = dt_cuda_scratch(dev, blocks * (int64_t)sizeof(float), (void **)&partial);
  if (st != DT_OK) return st;
  GRID_LAUNCH(mse_partials_kernel, blocks, THREADS, 0, dev->compute)(a, b, n, ga, partial);
  GRID_LAUNCH(mse_total_kernel, 1, THREADS, 0, dev->compute)(partial, blocks, n, loss);
  dt_cuda_scratch_free(dev, partial);
  LAUNCH_CHECK();
  return DT_OK;
}

/* ---------------------------------------------------------------- layer norm */

__global__ void layernorm_kernel(const float *x, const float *w, const float *b, float *y,
                                 float *mean, float *rstd, int64_t cols, float eps) {
  __shared__ float shared[32];
  const float *in = x + blockIdx.x * cols;
  float *out = y + blockIdx.x * cols;
  float s = 0.0f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) s += in[c];
  float mu = block_sum(s, shared) / (float)cols;
  float s2 = 0.0f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    float d = in[c] - mu;
    s2 += d * d;
  }
  float rs = rsqrtf(block_sum(s2, shared) / (float)cols + eps);
  if (threadIdx.x == 0) {
    mean[blockIdx.x] = mu;
    rstd[blockIdx.x] = rs;
  }
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    float v = (in[c] - mu) * rs;
    out[c] = (w ? v * w[c] : v) + (b ? b[c] : 0.0f);
  }
}

DT_EXPORT int dt_layernorm(const float *x, const float *w, const float *b, float *y, float *mean,
                           float *rstd, int64_t rows, int64_t cols, float eps) {
  CHECK_PTR(x); CHECK_PTR(y); CHECK_PTR(mean); CHECK_PTR(rstd);
  CHECK(rows >= 0 && rows <= ROWS_MAX && cols > 0, "dt_layernorm: bad shape [%lld, %lld]",
        (long long)rows, (long long)cols);
  CURRENT(dev);
  if (rows == 0) return DT_OK;
  GRID_LAUNCH(layernorm_kernel, (unsigned)rows, THREADS, 0, dev->compute)(x, w, b, y, mean, rstd, cols, eps);
  LAUNCH_CHECK();
  return DT_OK;
}

__global__ void layernorm_dx_kernel(const float *dy, const float *x, const float *w,
                                    const float *mean, const float *rstd, float *dx, int64_t cols) {
  __shared__ float shared[32];
  int64_t r = blockIdx.x;
  const float *g = dy + r * cols, *in = x + r * cols;
  float m = mean[r], rs = rstd[r], sum_dxhat = 0.0f, sum_dxhat_xhat = 0.0f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    float xhat = (in[c] - m) * rs, dxhat = w ? g[c] * w[c] : g[c];
    sum_dxhat += dxhat;
    sum_dxhat_xhat += dxhat * xhat;
  }
  float mean_dxhat = block_sum(sum_dxhat, shared) / (float)cols;
  float mean_dxhat_xhat = block_sum(sum_dxhat_xhat, shared) / (float)cols;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    float xhat = (in[c] - m) * rs, dxhat = w ? g[c] * w[c] : g[c];
    dx[r * cols + c] = rs * (dxhat - mean_dxhat - xhat * mean_dxhat_xhat);
  }
}

/* dw and db accumulate: a thread per column sums a chunk of rows (blockIdx.y) and adds it. */
__global__ void layernorm_dwdb_kernel(const float *dy, const float *x, const float *mean,
                                      const float *rstd, float *dw, float *db, int64_t rows,
                                      int64_t cols, int64_t chunk) {
  int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= cols) return;
  int64_t r0 = (int64_t)blockIdx.y * chunk, r1 = r0 + chunk < rows ? r0 + chunk : rows;
  float sw = 0.0f, sb = 0.0f;
  for (int64_t r = r0; r < r1; r++) {
    float g = dy[r * cols + c];
    sw += g * (x[r * cols + c] - mean[r]) * rstd[r];
    sb += g;
  }
  if (dw) atomicAdd(dw + c, sw);
  if (db) atomicAdd(db + c, sb);
}

DT_EXPORT int dt_layernorm_backward(const float *dy, const float *x, const float *w,
                                    const float *mean, const float *rstd, float *dx, float *dw,
                                    float *db, int64_t rows, int64_t cols) {
  CHECK_PTR(dy); CHECK_PTR(x); CHECK_PTR(mean); CHECK_PTR(rstd);
  CHECK(rows >= 0 && rows <= ROWS_MAX && cols > 0, "dt_layernorm_backward: bad shape");
  CURRENT(dev);
  if (rows == 0) return DT_OK;
  if (dx) {
    GRID_LAUNCH(layernorm_dx_kernel, (unsigned)rows, THREADS, 0, dev->compute)(dy, x, w, mean, rstd, dx, cols);
    LAUNCH_CHECK();
  }
  if (dw || db) {
    int64_t chunks = rows < 256 ? rows : 256, chunk = (rows + chunks - 1) / chunks;
    dim3 grid((unsigned)((cols + THREADS - 1) / THREADS), (unsigned)((rows + chunk - 1) / chunk));
    GRID_LAUNCH(layernorm_dwdb_kernel, grid, THREADS, 0, dev->compute)(dy, x, mean, rstd, dw, db, rows,
                                                               cols, chunk);
    LAUNCH_CHECK();
  }
  return DT_OK;
}

/* ---------------------------------------------------------------- embedding */

__global__ void embedding_kernel(const float *weight, const int32_t *indices, float *y, int64_t n,
                                 int64_t num, int64_t dim, dt_device_error_t *err) {
  GRID_LOOP(t, n * dim) {
    int64_t i = t / dim, d = t % dim;
    int32_t k = indices[i];
    if (k < 0 || k >= num) {
      if (d == 0) dt_report_device_error(err, DT_DEVERR_EMBEDDING, k, i, num);
      y[t] = 0.0f;
    } else {
      y[t] = weight[(int64_t)k * dim + d];
    }
  }
}

__global__ void embedding_backward_kernel(const float *gy, const int32_t *indices, float *gweight,
                                          int64_t n, int64_t num, int64_t dim,
                                          dt_device_error_t *err) {
  GRID_LOOP(t, n * dim) {
    int64_t i = t / dim, d = t % dim;
    int32_t k = indices[i];
    if (k < 0 || k >= num) {
      if (d == 0) dt_report_device_error(err, DT_DEVERR_EMBEDDING, k, i, num);
    } else {
      atomicAdd(gweight + (int64_t)k * dim + d, gy[t]);
    }
  }
}

DT_EXPORT int dt_embedding(const float *weight, const int32_t *indices, float *y, int64_t n,
                           int64_t num, int64_t dim) {
  CHECK_PTR(weight); CHECK_PTR(indices); CHECK_PTR(y);
  CHECK(n >= 0 && num >= 0 && dim >= 0, "dt_embedding: negative size");
  CURRENT(dev);
  if (n * dim > 0) LAUNCH(dev, n * dim, embedding_kernel, weight, indices, y, n, num, dim, dev->error);
  return DT_OK;
}

DT_EXPORT int dt_embedding_backward(const float *gy, const int32_t *indices, float *gweight,
                                    int64_t n, int64_t num, int64_t dim) {
  CHECK_PTR(gy); CHECK_PTR(indices); CHECK_PTR(gweight);
  CHECK(n >= 0 && num >= 0 && dim >= 0, "dt_embedding_backward: negative size");
  CURRENT(dev);
  if (n * dim > 0)
    LAUNCH(dev, n * dim, embedding_backward_kernel, gy, indices, gweight, n, num, dim, dev->error);
  return DT_OK;
}

/* ---------------------------------------------------------------- dropout */

/* The same keep decisions as csrc/core: the counter RNG at (seed, offset + i). */
__global__ void dropout_kernel(const float *x, float *y, int64_t n, float p, float scale,
                               uint64_t seed, uint64_t offset) {
  GRID_LOOP(i, n) y[i] = dt_dropout_keeps(seed, offset + (uint64_t)i, p) ? x[i] * scale : 0.0f;
}

DT_EXPORT int dt_dropout(const float *x, float *y, int64_t n, float p, uint64_t seed,
                         uint64_t offset) {
  CHECK_PTR(x); CHECK_PTR(y); CHECK_COUNT(n);
  CHECK(p >= 0.0f && p < 1.0f, "dropout: probability %g is outside [0, 1)", (double)p);
  CURRENT(dev);
  if (n > 0) LAUNCH(dev, n, dropout_kernel, x, y, n, p, 1.0f / (1.0f - p), seed, offset);
  return DT_OK;
}
