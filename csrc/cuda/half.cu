/* bf16 and f16 conversions with csrc/core/half.c's prototypes and bits (the per-element math is
 * csrc/core/half_math.h's): one thread per element over a grid-stride loop. */
#include "internal.cuh"
#include "../core/half_math.h"

__global__ void f32_to_bf16_kernel(const float *src, uint16_t *dst, int64_t n) {
  GRID_LOOP(i, n) dst[i] = dt_f32_to_bf16(src[i]);
}

__global__ void f32_to_f16_kernel(const float *src, uint16_t *dst, int64_t n) {
  GRID_LOOP(i, n) dst[i] = dt_f32_to_f16(src[i]);
}

__global__ void bf16_to_f32_kernel(const uint16_t *src, float *dst, int64_t n) {
  GRID_LOOP(i, n) dst[i] = dt_bf16_to_f32(src[i]);
}

__global__ void f16_to_f32_kernel(const uint16_t *src, float *dst, int64_t n) {
  GRID_LOOP(i, n) dst[i] = dt_f16_to_f32(src[i]);
}

DT_EXPORT int dt_cast_f32_half(const float *src, void *dst, int64_t n, int32_t dtype) {
  CHECK_PTR(src); CHECK_PTR(dst); CHECK_COUNT(n);
  CHECK(dtype == DT_BF16 || dtype == DT_F16, "cast_f32_half: dtype %d is not bf16 or f16", dtype);
  CURRENT(dev);
  uint16_t *out = (uint16_t *)dst;
  if (n > 0 && dtype == DT_BF16) LAUNCH(dev, n, f32_to_bf16_kernel, src, out, n);
  if (n > 0 && dtype == DT_F16) LAUNCH(dev, n, f32_to_f16_kernel, src, out, n);
  return DT_OK;
}

DT_EXPORT int dt_cast_half_f32(const void *src, int32_t dtype, float *dst, int64_t n) {
  CHECK_PTR(src); CHECK_PTR(dst); CHECK_COUNT(n);
  CHECK(dtype == DT_BF16 || dtype == DT_F16, "cast_half_f32: dtype %d is not bf16 or f16", dtype);
  CURRENT(dev);
  const uint16_t *in = (const uint16_t *)src;
  if (n > 0 && dtype == DT_BF16) LAUNCH(dev, n, bf16_to_f32_kernel, in, dst, n);
  if (n > 0 && dtype == DT_F16) LAUNCH(dev, n, f16_to_f32_kernel, in, dst, n);
  return DT_OK;
}
