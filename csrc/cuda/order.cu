/* Order-based kernels with csrc/core/order.c's prototypes and NaN rules: clamp, abs, elementwise
 * maximum/minimum, the largest or smallest element of each row with its index, and their
 * backwards. One thread per element, or one block per row. */
#include "internal.cuh"

/* ---------------------------------------------------------------- clamp, abs, maximum */

/* dt_clamp (lo > hi gives hi) and dt_clamp_range (NaN stays NaN) differ only in NaN handling. */
__global__ void clamp_kernel(const float *x, float *y, int64_t n, float lo, float hi, int keep_nan) {
  GRID_LOOP(i, n) {
    float v = x[i];
    if (keep_nan) y[i] = v < lo ? lo : v > hi ? hi : v;
    else {
      float c = v < lo ? lo : v;
      y[i] = c > hi ? hi : c;
    }
  }
}

DT_EXPORT int dt_clamp(const float *x, float *y, int64_t n, float lo, float hi) {
  CHECK_PTR(x); CHECK_PTR(y); CHECK_COUNT(n);
  CURRENT(dev);
  if (n > 0) LAUNCH(dev, n, clamp_kernel, x, y, n, lo, hi, 0);
  return DT_OK;
}

DT_EXPORT int dt_clamp_range(const float *x, float *y, int64_t n, float lo, float hi) {
  CHECK_PTR(x); CHECK_PTR(y); CHECK_COUNT(n);
  CURRENT(dev);
  if (n > 0) LAUNCH(dev, n, clamp_kernel, x, y, n, lo, hi, 1);
  return DT_OK;
}

__global__ void clamp_backward_kernel(const float *x, const float *gy, float *gx, int64_t n,
                                      float lo, float hi) {
  GRID_LOOP(i, n) gx[i] = x[i] >= lo && x[i] <= hi ? gy[i] : 0.0f;
}

DT_EXPORT int dt_clamp_backward(const float *x, const float *gy, float *gx, int64_t n, float lo,
                                float hi) {
  CHECK_PTR(x); CHECK_PTR(gy); CHECK_PTR(gx); CHECK_COUNT(n);
  CURRENT(dev);
  if (n > 0) LAUNCH(dev, n, clamp_backward_kernel, x, gy, gx, n, lo, hi);
  return DT_OK;
}

__global__ void abs_kernel(const float *x, const float *gy, float *out, int64_t n) {
  GRID_LOOP(i, n) {
    float v = x[i];
    out[i] = gy == NULL ? fabsf(v) : v > 0.0f ? gy[i] : v < 0.0f ? -gy[i] : 0.0f;
  }
}

DT_EXPORT int dt_abs(const float *x, float *y, int64_t n) {
  CHECK_PTR(x); CHECK_PTR(y); CHECK_COUNT(n);
  CURRENT(dev);
  if (n > 0) LAUNCH(dev, n, abs_kernel, x, (const float *)NULL, y, n);
  return DT_OK;
}

DT_EXPORT int dt_abs_backward(const float *x, const float *gy, float *gx, int64_t n) {
  CHECK_PTR(x); CHECK_PTR(gy); CHECK_PTR(gx); CHECK_COUNT(n);
  CURRENT(dev);
  if (n > 0) LAUNCH(dev, n, abs_kernel, x, gy, gx, n);
  return DT_OK;
}

__global__ void maximum_kernel(const float *a, const float *b, float *out, int64_t n, int is_min) {
  GRID_LOOP(i, n) {
    float x = a[i], y = b[i];
    int first = is_min ? x < y : x > y;
    out[i] = first || x != x ? x : y;
  }
}

__global__ void maximum_backward_kernel(const float *a, const float *b, const float *gy,
                                        float *ga, float *gb, int64_t n, int is_min) {
  GRID_LOOP(i, n) {
    float x = a[i], y = b[i];
    float share = x == y ? 0.5f : (is_min ? x < y : x > y) || x != x ? 1.0f : 0.0f;
    if (ga) ga[i] = gy[i] * share;
    if (gb) gb[i] = gy[i] * (x == y ? 0.5f : 1.0f - share);
  }
}

DT_EXPORT int dt_maximum(const float *a, const float *b, float *out, int64_t n, int32_t is_min) {
  CHECK_PTR(a); CHECK_PTR(b); CHECK_PTR(out); CHECK_COUNT(n);
  CURRENT(dev);
  if (n > 0) LAUNCH(dev, n, maximum_kernel, a, b, out, n, is_min);
  return DT_OK;
}

DT_EXPORT int dt_maximum_backward(const float *a, const float *b, const float *gy, float *ga,
                                  float *gb, int64_t n, int32_t is_min) {
  CHECK_PTR(a); CHECK_PTR(b); CHECK_PTR(gy); CHECK_COUNT(n);
  CURRENT(dev);
  if (n > 0) LAUNCH(dev, n, maximum_backward_kernel, a, b, gy, ga, gb, n, is_min);
  return DT_OK;
}

/* ---------------------------------------------------------------- row extremes */

/* Whether candidate (v, j) beats (best, bj): NaN first, then the extreme, then the lower index. */
__device__ __forceinline__ bool beats(float v, int64_t j, float best, int64_t bj, int is_min) {
  if (bj < 0) return true;
  bool vn = v != v, bn = best != best;
  if (vn || bn) return vn && (!bn || j < bj);
  if (v == best) return j < bj;
  return is_min ? v < best : v > best;
}

__global__ void max_rows_kernel(const float *x, float *values, int32_t *indices, int64_t cols,
                                int is_min) {
  __shared__ float bv[THREADS];
  __shared__ int64_t bi[THREADS];
  const float *row = x + blockIdx.x * cols;
  float best = 0.0f;
  int64_t at = -1;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
    if (beats(row[c], c, best, at, is_min)) best = row[c], at = c;
  bv[threadIdx.x] = best;
  bi[threadIdx.x] = at;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s && bi[threadIdx.x + s] >= 0 &&
        beats(bv[threadIdx.x + s], bi[threadIdx.x + s], bv[threadIdx.x], bi[threadIdx.x], is_min)) {
      bv[threadIdx.x] = bv[threadIdx.x + s];
      bi[threadIdx.x] = bi[threadIdx.x + s];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    values[blockIdx.x] = bv[0];
    if (indices) indices[blockIdx.x] = (int32_t)bi[0];
  }
}

DT_EXPORT int dt_max_rows(const float *x, float *values, int32_t *indices, int64_t rows,
                          int64_t cols, int32_t is_min) {
  CHECK_PTR(x); CHECK_PTR(values);
  CHECK(rows >= 0 && rows <= 0x7fffffff && cols > 0, "dt_max_rows: bad shape [%lld, %lld]",
        (long long)rows, (long long)cols);
  CURRENT(dev);
  if (rows > 0) {
    GRID_LAUNCH(max_rows_kernel, (unsigned)rows, THREADS, 0, dev->compute)(x, values, indices, cols, is_min);
    LAUNCH_CHECK();
  }
  return DT_OK;
}

__global__ void index_rows_backward_kernel(const float *gy, const int32_t *indices, float *gx,
                                           int64_t rows, int64_t cols, dt_device_error_t *err) {
  GRID_LOOP(t, rows * cols) {
    int64_t r = t / cols, c = t % cols;
    int32_t k = indices[r];
    if ((k < 0 || k >= cols) && c == 0) dt_report_device_error(err, DT_DEVERR_INDEX, k, r, cols);
    gx[t] = c == k ? gy[r] : 0.0f;
  }
}

DT_EXPORT int dt_index_rows_backward(const float *gy, const int32_t *indices, float *gx,
                                     int64_t rows, int64_t cols) {
  CHECK_PTR(gy); CHECK_PTR(indices); CHECK_PTR(gx);
  CHECK(rows >= 0 && cols > 0, "dt_index_rows_backward: bad shape");
  CURRENT(dev);
  if (rows > 0) LAUNCH(dev, rows * cols, index_rows_backward_kernel, gy, indices, gx, rows, cols, dev->error);
  return DT_OK;
}

/* Whether x is the extreme value v that max() or min() found (NaN matches NaN). */
__device__ __forceinline__ bool is_extreme(float x, float v) { return v != v ? x != x : x == v; }

/* Pass one of [Note: two-pass reductions]: how many of each block's elements are the extreme. */
__global__ void extreme_count_kernel(const float *x, const float *value, int64_t n,
                                     long long *partial) {
  __shared__ long long shared[32];
  float v = *value;
  long long count = 0;
  GRID_LOOP(i, n) count += is_extreme(x[i], v);
  count = block_sum(count, shared);
  if (threadIdx.x == 0) partial[blockIdx.x] = count;
}

/* Pass two, on the same grid: every block adds the (integer, so order-free) partial counts
 * itself, then gives each extreme element its equal share of gy, like csrc/core's. */
__global__ void extreme_share_kernel(const float *x, const float *value, const float *gy,
                                     float *gx, int64_t n, const long long *partial) {
  __shared__ long long shared[32];
  long long count = sum_partials(partial, (int64_t)gridDim.x, shared);
  float v = *value, share = count > 0 ? gy[0] / (float)count : 0.0f;
  GRID_LOOP(i, n) gx[i] = is_extreme(x[i], v) ? share : 0.0f;
}

DT_EXPORT int dt_extreme_backward(const float *x, const float *value, const float *gy, float *gx,
                                  int64_t n) {
  CHECK_PTR(x); CHECK_PTR(value); CHECK_PTR(gy); CHECK_PTR(gx); CHECK_COUNT(n);
  CURRENT(dev);
  unsigned blocks = partial_blocks(n);
  long long *partial;
  int st = dt_cuda_scratch(dev, blocks * (int64_t)sizeof(long long), (void **)&partial);
  if (st != DT_OK) return st;
  GRID_LAUNCH(extreme_count_kernel, blocks, THREADS, 0, dev->compute)(x, value, n, partial);
  GRID_LAUNCH(extreme_share_kernel, blocks, THREADS, 0, dev->compute)(x, value, gy, gx, n, partial);
  dt_cuda_scratch_free(dev, partial);
  LAUNCH_CHECK();
  return DT_OK;
}
