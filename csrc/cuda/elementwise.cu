/* Elementwise kernels with csrc/core/elementwise.c's prototypes and arithmetic (the per-element
 * math is csrc/core/scalar_math.h's): fills, copies, casts, binary and unary maps and their
 * backwards, axpy. One thread per element over a grid-stride loop. */
#include "internal.cuh"
#include "../core/broadcast.h"

template <typename T>
__global__ void fill_kernel(T *dst, int64_t n, T value) {
  GRID_LOOP(i, n) dst[i] = value;
}

DT_EXPORT int dt_fill_f32(float *dst, int64_t n, float value) {
  CHECK_PTR(dst); CHECK_COUNT(n);
  CURRENT(dev);
  if (n > 0) LAUNCH(dev, n, fill_kernel<float>, dst, n, value);
  return DT_OK;
}

DT_EXPORT int dt_fill_i32(int32_t *dst, int64_t n, int32_t value) {
  CHECK_PTR(dst); CHECK_COUNT(n);
  CURRENT(dev);
  if (n > 0) LAUNCH(dev, n, fill_kernel<int32_t>, dst, n, value);
  return DT_OK;
}

/* Within the device, ordered on the compute stream. */
DT_EXPORT int dt_copy(void *dst, const void *src, int64_t nbytes) {
  CHECK_PTR(dst); CHECK_PTR(src); CHECK_COUNT(nbytes);
  CURRENT(dev);
  cudaCheck(cudaMemcpyAsync(dst, src, (size_t)nbytes, cudaMemcpyDeviceToDevice, dev->compute));
  return DT_OK;
}

__global__ void cast_i32_f32_kernel(const int32_t *src, float *dst, int64_t n) {
  GRID_LOOP(i, n) dst[i] = (float)src[i];
}

__global__ void cast_u16_i32_kernel(const uint16_t *src, int32_t *dst, int64_t n) {
  GRID_LOOP(i, n) dst[i] = (int32_t)src[i];
}

/* Toward zero, saturating, NaN to 0: csrc/core's rule. */
__global__ void cast_f32_i32_kernel(const float *src, int32_t *dst, int64_t n) {
  GRID_LOOP(i, n) {
    float v = src[i];
    dst[i] = v != v ? 0 : v >= 2147483647.0f ? INT32_MAX : v <= -2147483648.0f ? INT32_MIN : (int32_t)v;
  }
}

DT_EXPORT int dt_cast_i32_f32(const int32_t *src, float *dst, int64_t n) {
  CHECK_PTR(src); CHECK_PTR(dst); CHECK_COUNT(n);
  CURRENT(dev);
  if (n > 0) LAUNCH(dev, n, cast_i32_f32_kernel, src, dst, n);
  return DT_OK;
}

DT_EXPORT int dt_cast_u16_i32(const uint16_t *src, int32_t *dst, int64_t n) {
  CHECK_PTR(src); CHECK_PTR(dst); CHECK_COUNT(n);
  CURRENT(dev);
  if (n > 0) LAUNCH(dev, n, cast_u16_i32_kernel, src, dst, n);
  return DT_OK;
}

DT_EXPORT int dt_cast_f32_i32(const float *src, int32_t *dst, int64_t n) {
  CHECK_PTR(src); CHECK_PTR(dst); CHECK_COUNT(n);
  CURRENT(dev);
  if (n > 0) LAUNCH(dev, n, cast_f32_i32_kernel, src, dst, n);
  return DT_OK;
}

/* ---------------------------------------------------------------- binary ops */

__global__ void binary_kernel(int op, const float *a, int64_t na, const float *b, int64_t nb,
                              float *out, int64_t n) {
  GRID_LOOP(i, n) out[i] = dt_binary_apply(op, a[na == n ? i : i % na], b[nb == n ? i : i % nb]);
}

DT_EXPORT int dt_binary(int32_t op, const float *a, int64_t na, const float *b, int64_t nb,
                        float *out, int64_t n) {
  CHECK_PTR(a); CHECK_PTR(b); CHECK_PTR(out);
  CHECK(dt_binary_known(op), "dt_binary: unknown op %d", op);
  int st = dt_check_broadcast("dt_binary", na, nb, n);
  if (st) return st;
  CURRENT(dev);
  if (n > 0) LAUNCH(dev, n, binary_kernel, op, a, na, b, nb, out, n);
  return DT_OK;
}

/* The per-element gradients; `which` 0 writes d/da into g, 1 writes d/db. */
__global__ void binary_grad_kernel(int op, int which, const float *a, int64_t na, const float *b,
                                   int64_t nb, const float *gy, float *g, int64_t n) {
  GRID_LOOP(i, n) {
    float dx, dy;
    dt_binary_grads(op, a[na == n ? i : i % na], b[nb == n ? i : i % nb], gy[i], &dx, &dy);
    g[i] = which == 0 ? dx : dy;
  }
}

/* One operand's gradient: written in place when it has n elements; otherwise computed per output
 * element into scratch and summed over the repeats (dt_sum_axis over [1, n / len, len]). */
static int binary_grad(dt_cuda_device *dev, int op, int which, const float *a, int64_t na,
                       const float *b, int64_t nb, const float *gy, float *g, int64_t n) {
  int64_t len = which == 0 ? na : nb;
  if (len == n) {
    LAUNCH(dev, n, binary_grad_kernel, op, which, a, na, b, nb, gy, g, n);
    return DT_OK;
  }
  void *full;
  int st = dt_cuda_scratch(dev, n * (int64_t)sizeof(float), &full);
  if (st != DT_OK) return st;
  GRID_LAUNCH(binary_grad_kernel, blocks_for(n), THREADS, 0, dev->compute)(op, which, a, na, b, nb, gy,
                                                                  (float *)full, n);
  cudaError_t err = cudaGetLastError();
  st = err == cudaSuccess ? dt_sum_axis((const float *)full, g, 1, n / len, len, 1.0f) : DT_EDEVICE;
  dt_cuda_scratch_free(dev, full);
  if (err != cudaSuccess) cudaCheck(err);
  return st;
}

DT_EXPORT int dt_binary_backward(int32_t op, const float *a, int64_t na, const float *b,
                                 int64_t nb, const float *gy, int64_t n, float *ga, float *gb) {
  CHECK_PTR(a); CHECK_PTR(b); CHECK_PTR(gy);
  CHECK(dt_binary_known(op), "dt_binary_backward: unknown op %d", op);
  int st = dt_check_broadcast("dt_binary_backward", na, nb, n);
  if (st) return st;
  CURRENT(dev);
  if (n == 0) return DT_OK;
  if (ga && (st = binary_grad(dev, op, 0, a, na, b, nb, gy, ga, n)) != DT_OK) return st;
  if (gb && (st = binary_grad(dev, op, 1, a, na, b, nb, gy, gb, n)) != DT_OK) return st;
  return DT_OK;
}

/* ---------------------------------------------------------------- unary ops */

__global__ void unary_kernel(int op, const float *x, float *y, int64_t n, float p) {
  GRID_LOOP(i, n) y[i] = dt_unary_apply(op, x[i], p);
}

__global__ void unary_backward_kernel(int op, const float *x, const float *y, const float *gy,
                                      float *gx, int64_t n, float p) {
  GRID_LOOP(i, n) gx[i] = gy[i] * dt_unary_derivative(op, x ? x[i] : 0.0f, y ? y[i] : 0.0f, p);
}

DT_EXPORT int dt_unary(int32_t op, const float *x, float *y, int64_t n, float p) {
  CHECK_PTR(x); CHECK_PTR(y); CHECK_COUNT(n);
  CHECK(dt_unary_known(op), "dt_unary: unknown op %d", op);
  CURRENT(dev);
  if (n > 0) LAUNCH(dev, n, unary_kernel, op, x, y, n, p);
  return DT_OK;
}

DT_EXPORT int dt_unary_backward(int32_t op, const float *x, const float *y, const float *gy,
                                float *gx, int64_t n, float p) {
  CHECK_PTR(gy); CHECK_PTR(gx); CHECK_COUNT(n);
  CHECK(dt_unary_known(op), "dt_unary_backward: unknown op %d", op);
  CHECK(!dt_unary_needs_y(op) || y != NULL, "dt_unary_backward: op %d needs the output y", op);
  CHECK(!dt_unary_needs_x(op) || x != NULL, "dt_unary_backward: op %d needs the input x", op);
  CURRENT(dev);
  if (n > 0) LAUNCH(dev, n, unary_backward_kernel, op, x, y, gy, gx, n, p);
  return DT_OK;
}

DT_EXPORT int32_t dt_unary_reads(int32_t op) { return dt_unary_reads_of(op); }

__global__ void axpy_kernel(float *y, const float *x, int64_t n, float alpha) {
  GRID_LOOP(i, n) y[i] += alpha * x[i];
}

DT_EXPORT int dt_axpy(float *y, const float *x, int64_t n, float alpha) {
  CHECK_PTR(y); CHECK_PTR(x); CHECK_COUNT(n);
  CURRENT(dev);
  if (n > 0) LAUNCH(dev, n, axpy_kernel, y, x, n, alpha);
  return DT_OK;
}
