/* Kernels of the bool and i32 dtypes with csrc/core/compare.c's prototypes: comparisons giving
 * bool, casts to and from bool, integer arithmetic (a zero divisor is a device-side error) and
 * sums. A shorter operand's elements repeat every `na` (or `nb`) output elements. */
#include "internal.cuh"
#include "../core/broadcast.h"

template <typename T>
__global__ void compare_kernel(int op, const T *a, int64_t na, const T *b, int64_t nb,
                               uint8_t *out, int64_t n) {
  GRID_LOOP(i, n) {
    T u = a[na == n ? i : i % na], v = b[nb == n ? i : i % nb];
    bool r = op == DT_EQ ? u == v : op == DT_NE ? u != v : op == DT_LT ? u < v
           : op == DT_LE ? u <= v : op == DT_GT ? u > v : u >= v;
    out[i] = r ? 1 : 0;
  }
}

DT_EXPORT int dt_compare(int32_t op, int32_t dtype, const void *a, int64_t na, const void *b,
                         int64_t nb, uint8_t *out, int64_t n) {
  CHECK_PTR(a); CHECK_PTR(b); CHECK_PTR(out);
  CHECK(op >= DT_EQ && op <= DT_GE, "dt_compare: unknown op %d", op);
  CHECK(dtype >= DT_F32 && dtype <= DT_BOOL, "dt_compare: unknown dtype %d", dtype);
  int st = dt_check_repeat("dt_compare", na, nb, n);
  if (st) return st;
  CURRENT(dev);
  if (n == 0) return DT_OK;
  if (dtype == DT_F32)
    LAUNCH(dev, n, compare_kernel<float>, op, (const float *)a, na, (const float *)b, nb, out, n);
  else if (dtype == DT_I32)
    LAUNCH(dev, n, compare_kernel<int32_t>, op, (const int32_t *)a, na, (const int32_t *)b, nb, out, n);
  else
    LAUNCH(dev, n, compare_kernel<uint8_t>, op, (const uint8_t *)a, na, (const uint8_t *)b, nb, out, n);
  return DT_OK;
}

/* Casts to and from bool: non-zero is true, true is 1. */
__global__ void cast_bool_kernel(const void *src, int src_dtype, void *dst, int dst_dtype, int64_t n) {
  GRID_LOOP(i, n) {
    if (dst_dtype == DT_BOOL) {
      ((uint8_t *)dst)[i] = src_dtype == DT_F32 ? ((const float *)src)[i] != 0.0f
                                                   : ((const int32_t *)src)[i] != 0;
    } else {
      uint8_t s = ((const uint8_t *)src)[i];
      if (dst_dtype == DT_F32) ((float *)dst)[i] = s ? 1.0f : 0.0f;
      else ((int32_t *)dst)[i] = s ? 1 : 0;
    }
  }
}

DT_EXPORT int dt_cast(const void *src, int32_t src_dtype, void *dst, int32_t dst_dtype, int64_t n) {
  CHECK_PTR(src); CHECK_PTR(dst); CHECK_COUNT(n);
  CHECK(src_dtype >= DT_F32 && src_dtype <= DT_BOOL, "dt_cast: unknown source dtype %d", src_dtype);
  CHECK(dst_dtype >= DT_F32 && dst_dtype <= DT_BOOL, "dt_cast: unknown target dtype %d", dst_dtype);
  CHECK(src_dtype == dst_dtype || src_dtype == DT_BOOL || dst_dtype == DT_BOOL,
        "dt_cast: f32 and i32 convert with dt_cast_f32_i32 / dt_cast_i32_f32");
  CURRENT(dev);
  if (n == 0) return DT_OK;
  if (src_dtype == dst_dtype) {
    cudaCheck(cudaMemcpyAsync(dst, src, (size_t)(n * (src_dtype == DT_BOOL ? 1 : 4)),
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
      total += dtype == DT_I32 ? ((const int32_t *)x)[at] : ((const uint8_t *)x)[at];
    }
    out[t] = total > INT32_MAX ? INT32_MAX : total < INT32_MIN ? INT32_MIN : (int32_t)total;
  }
}

DT_EXPORT int dt_sum_axis_int(const void *x, int32_t dtype, int32_t *out, int64_t outer,
                              int64_t axis, int64_t inner) {
  CHECK_PTR(x); CHECK_PTR(out); CHECK_COUNT(outer); CHECK_COUNT(axis); CHECK_COUNT(inner);
  CHECK(dtype == DT_I32 || dtype == DT_BOOL, "dt_sum_axis_int: dtype %d is not i32 or bool", dtype);
  CURRENT(dev);
  if (outer * inner > 0) LAUNCH(dev, outer * inner, sum_axis_int_kernel, x, dtype, out, outer, axis, inner);
  return DT_OK;
}

/* dt_binary_i32_apply at each element; a zero divisor is reported as a device-side error (the
 * element is left 0). */
__global__ void binary_i32_kernel(int op, const int32_t *a, int64_t na, const int32_t *b,
                                  int64_t nb, int32_t *out, int64_t n, dt_device_error_t *err) {
  GRID_LOOP(i, n) {
    int32_t x = a[na == n ? i : i % na], y = b[nb == n ? i : i % nb];
    if (y == 0 && dt_binary_divides(op)) {
      dt_report_device_error(err, DT_DEVERR_DIVISION, 0, i, 0);
      out[i] = 0;
    } else {
      out[i] = dt_binary_i32_apply(op, x, y);
    }
  }
}

DT_EXPORT int dt_binary_i32(int32_t op, const int32_t *a, int64_t na, const int32_t *b, int64_t nb,
                            int32_t *out, int64_t n) {
  CHECK_PTR(a); CHECK_PTR(b); CHECK_PTR(out);
  CHECK(dt_binary_known(op), "dt_binary_i32: unknown op %d", op);
  int st = dt_check_repeat("dt_binary_i32", na, nb, n);
  if (st) return st;
  CURRENT(dev);
  if (n > 0) LAUNCH(dev, n, binary_i32_kernel, op, a, na, b, nb, out, n, dev->error);
  return DT_OK;
}
