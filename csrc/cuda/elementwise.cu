/* Elementwise kernels with csrc/core/elementwise.c's prototypes and arithmetic: fills, strided
 * copy, casts, binary and unary maps and their backwards, axpy. One thread per element over a
 * grid-stride loop. */
#include "internal.cuh"

extern "C" int dt_sum_axis(const float *x, float *out, int64_t outer, int64_t axis, int64_t inner,
                           float scale);

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

/* Shape and strides travel by value in the launch (8 dimensions at most, as on the CPU). */
struct strided_t {
  int64_t shape[8], strides[8];
  int32_t ndim;
};

template <typename T>
__global__ void copy_strided_kernel(const T *src, T *dst, strided_t s, int64_t total) {
  GRID_LOOP(i, total) {
    int64_t rest = i, offset = 0;
    for (int d = s.ndim - 1; d >= 0; d--) {
      offset += (rest % s.shape[d]) * s.strides[d];
      rest /= s.shape[d];
    }
    dst[i] = src[offset];
  }
}

/* shape and strides are host memory (as in csrc/core), src and dst device memory; 4-byte
 * elements, or 1-byte ones (bool). */
DT_EXPORT int dt_copy_strided(const void *src, void *dst, int32_t ndim, const int64_t *shape,
                              const int64_t *strides, int32_t elem_size) {
  CHECK_PTR(src); CHECK_PTR(dst); CHECK_PTR(shape); CHECK_PTR(strides);
  CHECK(ndim >= 0 && ndim <= 8, "dt_copy_strided: %d dimensions (at most 8)", ndim);
  CHECK(elem_size == 4 || elem_size == 1, "dt_copy_strided: element size %d (only 4 or 1)", elem_size);
  strided_t s = {};
  s.ndim = ndim;
  int64_t total = 1;
  for (int d = 0; d < ndim; d++) {
    CHECK(shape[d] >= 0, "dt_copy_strided: negative dim");
    s.shape[d] = shape[d];
    s.strides[d] = strides[d];
    total *= shape[d];
  }
  CURRENT(dev);
  if (total > 0 && elem_size == 4)
    LAUNCH(dev, total, copy_strided_kernel<int32_t>, (const int32_t *)src, (int32_t *)dst, s, total);
  else if (total > 0)
    LAUNCH(dev, total, copy_strided_kernel<uint8_t>, (const uint8_t *)src, (uint8_t *)dst, s, total);
  return DT_OK;
}

__global__ void cast_i32_f32_kernel(const int32_t *src, float *dst, int64_t n) {
  GRID_LOOP(i, n) dst[i] = (float)src[i];
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

DT_EXPORT int dt_cast_f32_i32(const float *src, int32_t *dst, int64_t n) {
  CHECK_PTR(src); CHECK_PTR(dst); CHECK_COUNT(n);
  CURRENT(dev);
  if (n > 0) LAUNCH(dev, n, cast_f32_i32_kernel, src, dst, n);
  return DT_OK;
}

/* ---------------------------------------------------------------- binary ops */

static int check_broadcast(const char *fn, int64_t na, int64_t nb, int64_t n) {
  CHECK(na >= 0 && nb >= 0 && n >= 0, "%s: negative size", fn);
  CHECK((na == n || (na > 0 && n % na == 0 && nb == n)) && (nb == n || (nb > 0 && n % nb == 0 && na == n)),
        "%s: operands of %lld and %lld elements do not broadcast to %lld", fn, (long long)na,
        (long long)nb, (long long)n);
  return DT_OK;
}

__device__ __forceinline__ float apply_binary(int op, float x, float y) {
  switch (op) {
    case DT_ADD: return x + y;
    case DT_SUB: return x - y;
    case DT_MUL: return x * y;
    default: return x / y;
  }
}

__global__ void binary_kernel(int op, const float *a, int64_t na, const float *b, int64_t nb,
                              float *out, int64_t n) {
  GRID_LOOP(i, n) out[i] = apply_binary(op, a[na == n ? i : i % na], b[nb == n ? i : i % nb]);
}

DT_EXPORT int dt_binary(int32_t op, const float *a, int64_t na, const float *b, int64_t nb,
                        float *out, int64_t n) {
  CHECK_PTR(a); CHECK_PTR(b); CHECK_PTR(out);
  CHECK(op >= DT_ADD && op <= DT_DIV, "dt_binary: unknown op %d", op);
  int st = check_broadcast("dt_binary", na, nb, n);
  if (st) return st;
  CURRENT(dev);
  if (n > 0) LAUNCH(dev, n, binary_kernel, op, a, na, b, nb, out, n);
  return DT_OK;
}

/* The per-element gradients; `which` 0 writes d/da into g, 1 writes d/db. */
__global__ void binary_grad_kernel(int op, int which, const float *a, int64_t na, const float *b,
                                   int64_t nb, const float *gy, float *g, int64_t n) {
  GRID_LOOP(i, n) {
    float x = a[na == n ? i : i % na], y = b[nb == n ? i : i % nb], gi = gy[i];
    float d;
    if (which == 0) d = op == DT_MUL ? gi * y : op == DT_DIV ? gi / y : gi;
    else d = op == DT_ADD ? gi : op == DT_SUB ? -gi : op == DT_MUL ? gi * x : -gi * x / (y * y);
    g[i] = d;
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
  binary_grad_kernel<<<blocks_for(n), THREADS, 0, dev->compute>>>(op, which, a, na, b, nb, gy,
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
  CHECK(op >= DT_ADD && op <= DT_DIV, "dt_binary_backward: unknown op %d", op);
  int st = check_broadcast("dt_binary_backward", na, nb, n);
  if (st) return st;
  CURRENT(dev);
  if (n == 0) return DT_OK;
  if (ga && (st = binary_grad(dev, op, 0, a, na, b, nb, gy, ga, n)) != DT_OK) return st;
  if (gb && (st = binary_grad(dev, op, 1, a, na, b, nb, gy, gb, n)) != DT_OK) return st;
  return DT_OK;
}

/* ---------------------------------------------------------------- unary ops */

#define SQRT_2_OVER_PI 0.7978845608028654f
#define GELU_COEF 0.044715f
#define INV_SQRT_2 0.7071067811865476f
#define INV_SQRT_2PI 0.3989422804014327f

__device__ __forceinline__ float apply_unary(int op, float x, float p) {
  switch (op) {
    case DT_RELU: return x > 0.0f ? x : 0.0f;
    case DT_GELU_TANH: return 0.5f * x * (1.0f + tanhf(SQRT_2_OVER_PI * (x + GELU_COEF * x * x * x)));
    case DT_GELU_ERF: return 0.5f * x * (1.0f + erff(x * INV_SQRT_2));
    case DT_EXP: return expf(x);
    case DT_LOG: return logf(x);
    case DT_TANH: return tanhf(x);
    case DT_SIGMOID: return 1.0f / (1.0f + expf(-x));
    case DT_NEG: return -x;
    case DT_SQRT: return sqrtf(x);
    case DT_POW: return powf(x, p);
    case DT_SCALE: return x * p;
    default: return x + p;
  }
}

__device__ __forceinline__ float unary_derivative(int op, float x, float y, float p) {
  switch (op) {
    case DT_RELU: return x > 0.0f ? 1.0f : 0.0f;
    case DT_GELU_TANH: {
      float t = tanhf(SQRT_2_OVER_PI * (x + GELU_COEF * x * x * x));
      return 0.5f * (1.0f + t) +
             0.5f * x * (1.0f - t * t) * SQRT_2_OVER_PI * (1.0f + 3.0f * GELU_COEF * x * x);
    }
    case DT_GELU_ERF: return 0.5f * (1.0f + erff(x * INV_SQRT_2)) + x * INV_SQRT_2PI * expf(-0.5f * x * x);
    case DT_EXP: return y;
    case DT_LOG: return 1.0f / x;
    case DT_TANH: return 1.0f - y * y;
    case DT_SIGMOID: return y * (1.0f - y);
    case DT_NEG: return -1.0f;
    case DT_SQRT: return 0.5f / y;
    case DT_POW: return p == 0.0f ? 0.0f : p * powf(x, p - 1.0f);
    case DT_SCALE: return p;
    default: return 1.0f;
  }
}

__global__ void unary_kernel(int op, const float *x, float *y, int64_t n, float p) {
  GRID_LOOP(i, n) y[i] = apply_unary(op, x[i], p);
}

__global__ void unary_backward_kernel(int op, const float *x, const float *y, const float *gy,
                                      float *gx, int64_t n, float p) {
  GRID_LOOP(i, n) gx[i] = gy[i] * unary_derivative(op, x ? x[i] : 0.0f, y ? y[i] : 0.0f, p);
}

DT_EXPORT int dt_unary(int32_t op, const float *x, float *y, int64_t n, float p) {
  CHECK_PTR(x); CHECK_PTR(y); CHECK_COUNT(n);
  CHECK(op >= DT_RELU && op <= DT_ADD_SCALAR, "dt_unary: unknown op %d", op);
  CURRENT(dev);
  if (n > 0) LAUNCH(dev, n, unary_kernel, op, x, y, n, p);
  return DT_OK;
}

DT_EXPORT int dt_unary_backward(int32_t op, const float *x, const float *y, const float *gy,
                                float *gx, int64_t n, float p) {
  CHECK_PTR(gy); CHECK_PTR(gx); CHECK_COUNT(n);
  CHECK(op >= DT_RELU && op <= DT_ADD_SCALAR, "dt_unary_backward: unknown op %d", op);
  int needs_y = op == DT_EXP || op == DT_TANH || op == DT_SIGMOID || op == DT_SQRT;
  int needs_x = op == DT_RELU || op == DT_GELU_TANH || op == DT_GELU_ERF || op == DT_LOG || op == DT_POW;
  CHECK(!needs_y || y != NULL, "dt_unary_backward: op %d needs the output y", op);
  CHECK(!needs_x || x != NULL, "dt_unary_backward: op %d needs the input x", op);
  CURRENT(dev);
  if (n > 0) LAUNCH(dev, n, unary_backward_kernel, op, x, y, gy, gx, n, p);
  return DT_OK;
}

__global__ void axpy_kernel(float *y, const float *x, int64_t n, float alpha) {
  GRID_LOOP(i, n) y[i] += alpha * x[i];
}

DT_EXPORT int dt_axpy(float *y, const float *x, int64_t n, float alpha) {
  CHECK_PTR(y); CHECK_PTR(x); CHECK_COUNT(n);
  CURRENT(dev);
  if (n > 0) LAUNCH(dev, n, axpy_kernel, y, x, n, alpha);
  return DT_OK;
}
