/* Order-based kernels (csrc/core/minmax.c: clamp, abs, maximum/minimum, row extremes and their
 * backwards), the kernels of the bool and i32 dtypes (csrc/core/compare.c: comparisons, casts,
 * integer arithmetic and sums), and the write into a strided view (csrc/core/slice.c), with their
 * prototypes and NaN rules. One thread per element, or one block per row. */
#include "internal.cuh"

enum { DTYPE_F32 = 0, DTYPE_I32 = 1, DTYPE_BOOL = 2 };
enum { CMP_EQ = 0, CMP_NE, CMP_LT, CMP_LE, CMP_GT, CMP_GE };

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
    max_rows_kernel<<<(unsigned)rows, THREADS, 0, dev->compute>>>(x, values, indices, cols, is_min);
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

/* One block: how many elements equal *value (NaN matches NaN), then the share of each. */
__global__ void extreme_backward_kernel(const float *x, const float *value, const float *gy,
                                        float *gx, int64_t n) {
  __shared__ float shared[32];
  float v = *value;
  bool nan = v != v;
  float count = 0.0f;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) count += (nan ? x[i] != x[i] : x[i] == v);
  count = block_sum(count, shared);
  float share = count > 0.0f ? gy[0] / count : 0.0f;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
    gx[i] = (nan ? x[i] != x[i] : x[i] == v) ? share : 0.0f;
}

DT_EXPORT int dt_extreme_backward(const float *x, const float *value, const float *gy, float *gx,
                                  int64_t n) {
  CHECK_PTR(x); CHECK_PTR(value); CHECK_PTR(gy); CHECK_PTR(gx); CHECK_COUNT(n);
  CURRENT(dev);
  extreme_backward_kernel<<<1, 1024, 0, dev->compute>>>(x, value, gy, gx, n);
  LAUNCH_CHECK();
  return DT_OK;
}

/* ---------------------------------------------------------------- bool and i32 */

static int check_repeat(const char *fn, int64_t na, int64_t nb, int64_t n) {
  CHECK(n >= 0 && na >= 0 && nb >= 0, "%s: negative count", fn);
  CHECK((na == n || (na > 0 && n % na == 0)) && (nb == n || (nb > 0 && n % nb == 0)),
        "%s: operands of %lld and %lld elements do not broadcast to %lld", fn, (long long)na,
        (long long)nb, (long long)n);
  return DT_OK;
}

template <typename T>
__global__ void compare_kernel(int op, const T *a, int64_t na, const T *b, int64_t nb,
                               uint8_t *out, int64_t n) {
  GRID_LOOP(i, n) {
    T u = a[na == n ? i : i % na], v = b[nb == n ? i : i % nb];
    bool r = op == CMP_EQ ? u == v : op == CMP_NE ? u != v : op == CMP_LT ? u < v
           : op == CMP_LE ? u <= v : op == CMP_GT ? u > v : u >= v;
    out[i] = r ? 1 : 0;
  }
}

DT_EXPORT int dt_compare(int32_t op, int32_t dtype, const void *a, int64_t na, const void *b,
                         int64_t nb, uint8_t *out, int64_t n) {
  CHECK_PTR(a); CHECK_PTR(b); CHECK_PTR(out);
  CHECK(op >= CMP_EQ && op <= CMP_GE, "dt_compare: unknown op %d", op);
  CHECK(dtype >= DTYPE_F32 && dtype <= DTYPE_BOOL, "dt_compare: unknown dtype %d", dtype);
  int st = check_repeat("dt_compare", na, nb, n);
  if (st) return st;
  CURRENT(dev);
  if (n == 0) return DT_OK;
  if (dtype == DTYPE_F32)
    LAUNCH(dev, n, compare_kernel<float>, op, (const float *)a, na, (const float *)b, nb, out, n);
  else if (dtype == DTYPE_I32)
    LAUNCH(dev, n, compare_kernel<int32_t>, op, (const int32_t *)a, na, (const int32_t *)b, nb, out, n);
  else
    LAUNCH(dev, n, compare_kernel<uint8_t>, op, (const uint8_t *)a, na, (const uint8_t *)b, nb, out, n);
  return DT_OK;
}

/* Casts to and from bool: non-zero is true, true is 1. */
__global__ void cast_bool_kernel(const void *src, int src_dtype, void *dst, int dst_dtype, int64_t n) {
  GRID_LOOP(i, n) {
    if (dst_dtype == DTYPE_BOOL) {
      ((uint8_t *)dst)[i] = src_dtype == DTYPE_F32 ? ((const float *)src)[i] != 0.0f
                                                   : ((const int32_t *)src)[i] != 0;
    } else {
      uint8_t s = ((const uint8_t *)src)[i];
      if (dst_dtype == DTYPE_F32) ((float *)dst)[i] = s ? 1.0f : 0.0f;
      else ((int32_t *)dst)[i] = s ? 1 : 0;
    }
  }
}

DT_EXPORT int dt_cast(const void *src, int32_t src_dtype, void *dst, int32_t dst_dtype, int64_t n) {
  CHECK_PTR(src); CHECK_PTR(dst); CHECK_COUNT(n);
  CHECK(src_dtype >= DTYPE_F32 && src_dtype <= DTYPE_BOOL, "dt_cast: unknown source dtype %d", src_dtype);
  CHECK(dst_dtype >= DTYPE_F32 && dst_dtype <= DTYPE_BOOL, "dt_cast: unknown target dtype %d", dst_dtype);
  CHECK(src_dtype == dst_dtype || src_dtype == DTYPE_BOOL || dst_dtype == DTYPE_BOOL,
        "dt_cast: f32 and i32 convert with dt_cast_f32_i32 / dt_cast_i32_f32");
  CURRENT(dev);
  if (n == 0) return DT_OK;
  if (src_dtype == dst_dtype) {
    cudaCheck(cudaMemcpyAsync(dst, src, (size_t)(n * (src_dtype == DTYPE_BOOL ? 1 : 4)),
                              cudaMemcpyDeviceToDevice, dev->compute));
    return DT_OK;
  }
  LAUNCH(dev, n, cast_bool_kernel, src, src_dtype, dst, dst_dtype, n);
  return DT_OK;
}

DT_EXPORT int dt_fill_u8(uint8_t *dst, int64_t n, int32_t value) {
  CHECK_PTR(dst); CHECK_COUNT(n);
  CURRENT(dev);
  if (n > 0) cudaCheck(cudaMemsetAsync(dst, value ? 1 : 0, (size_t)n, dev->compute));
  return DT_OK;
}

/* A thread per output element, summing in 64 bits and saturating to the i32 range. */
__global__ void sum_axis_int_kernel(const void *x, int dtype, int32_t *out, int64_t outer,
                                    int64_t axis, int64_t inner) {
  GRID_LOOP(t, outer * inner) {
    int64_t o = t / inner, i = t % inner;
    long long total = 0;
    for (int64_t k = 0; k < axis; k++) {
      int64_t at = (o * axis + k) * inner + i;
      total += dtype == DTYPE_I32 ? ((const int32_t *)x)[at] : ((const uint8_t *)x)[at];
    }
    out[t] = total > INT32_MAX ? INT32_MAX : total < INT32_MIN ? INT32_MIN : (int32_t)total;
  }
}

DT_EXPORT int dt_sum_axis_int(const void *x, int32_t dtype, int32_t *out, int64_t outer,
                              int64_t axis, int64_t inner) {
  CHECK_PTR(x); CHECK_PTR(out); CHECK_COUNT(outer); CHECK_COUNT(axis); CHECK_COUNT(inner);
  CHECK(dtype == DTYPE_I32 || dtype == DTYPE_BOOL, "dt_sum_axis_int: dtype %d is not i32 or bool", dtype);
  CURRENT(dev);
  if (outer * inner > 0) LAUNCH(dev, outer * inner, sum_axis_int_kernel, x, dtype, out, outer, axis, inner);
  return DT_OK;
}

/* Wrapping arithmetic, and floor division (DT_DIV) as Python's; a zero divisor is reported as a
 * device-side error (the element is left 0). */
__global__ void binary_i32_kernel(int op, const int32_t *a, int64_t na, const int32_t *b,
                                  int64_t nb, int32_t *out, int64_t n, dt_device_error_t *err) {
  GRID_LOOP(i, n) {
    uint32_t x = (uint32_t)a[na == n ? i : i % na], y = (uint32_t)b[nb == n ? i : i % nb];
    if (op == DT_ADD) out[i] = (int32_t)(x + y);
    else if (op == DT_SUB) out[i] = (int32_t)(x - y);
    else if (op == DT_MUL) out[i] = (int32_t)(x * y);
    else if (y == 0) {
      dt_report_device_error(err, DT_DEVERR_DIVISION, 0, i, 0);
      out[i] = 0;
    } else if ((int32_t)y == -1) {
      out[i] = (int32_t)(0u - x);
    } else {
      int32_t p = (int32_t)x, q = (int32_t)y, d = p / q;
      out[i] = (p % q != 0 && ((p < 0) != (q < 0))) ? d - 1 : d;
    }
  }
}

DT_EXPORT int dt_binary_i32(int32_t op, const int32_t *a, int64_t na, const int32_t *b, int64_t nb,
                            int32_t *out, int64_t n) {
  CHECK_PTR(a); CHECK_PTR(b); CHECK_PTR(out);
  CHECK(op >= DT_ADD && op <= DT_DIV, "dt_binary_i32: unknown op %d", op);
  int st = check_repeat("dt_binary_i32", na, nb, n);
  if (st) return st;
  CURRENT(dev);
  if (n > 0) LAUNCH(dev, n, binary_i32_kernel, op, a, na, b, nb, out, n, dev->error);
  return DT_OK;
}

/* ---------------------------------------------------------------- strided writes */

struct view_t {
  int64_t shape[8], strides[8];
  int32_t ndim;
};

template <typename T>
__global__ void copy_to_strided_kernel(const T *src, T *dst, view_t v, int64_t total) {
  GRID_LOOP(i, total) {
    int64_t rest = i, offset = 0;
    for (int d = v.ndim - 1; d >= 0; d--) {
      offset += (rest % v.shape[d]) * v.strides[d];
      rest /= v.shape[d];
    }
    dst[offset] = src[i];
  }
}

/* Contiguous src into the strided view dst (shape and strides in host memory). */
DT_EXPORT int dt_copy_to_strided(const void *src, void *dst, int32_t ndim, const int64_t *shape,
                                 const int64_t *strides, int32_t elem_size) {
  CHECK_PTR(src); CHECK_PTR(dst); CHECK_PTR(shape); CHECK_PTR(strides);
  CHECK(ndim >= 0 && ndim <= 8, "dt_copy_to_strided: %d dimensions (at most 8)", ndim);
  CHECK(elem_size == 4 || elem_size == 1, "dt_copy_to_strided: element size %d (1 or 4)", elem_size);
  view_t v = {};
  v.ndim = ndim;
  int64_t total = 1;
  for (int d = 0; d < ndim; d++) {
    CHECK(shape[d] >= 0, "dt_copy_to_strided: negative dimension %lld", (long long)shape[d]);
    v.shape[d] = shape[d];
    v.strides[d] = strides[d];
    total *= shape[d];
  }
  CURRENT(dev);
  if (total == 0) return DT_OK;
  if (elem_size == 4)
    LAUNCH(dev, total, copy_to_strided_kernel<int32_t>, (const int32_t *)src, (int32_t *)dst, v, total);
  else
    LAUNCH(dev, total, copy_to_strided_kernel<uint8_t>, (const uint8_t *)src, (uint8_t *)dst, v, total);
  return DT_OK;
}
