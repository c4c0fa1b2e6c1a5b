/* bf16 and f16 conversions: the one place dtrain rounds f32 to a 2-byte float, with PyTorch's CPU
 * bits (tests/fixtures/gen_half.py): round to nearest even, subnormals kept, infinities and
 * overflow to infinity (f16) or kept (bf16, which has f32's range), and NaN as PyTorch's
 * vectorised CPU kernels write it: 0xFFFF in bf16 (every NaN, either sign), a quiet NaN with the
 * top payload bits in f16 (F16C's vcvtps2ph, which `_Float16` compiles to). The per-element math
 * is half_math.h's, shared with csrc/cuda/half.cu. */
#include "dtrain.h"
#include "half_math.h"

int dt_cast_f32_half(const float *src, void *dst, int64_t n, int32_t dtype) {
  CHECK_PTR(src); CHECK_PTR(dst); CHECK_COUNT(n);
  CHECK(dtype == DT_BF16 || dtype == DT_F16, "cast_f32_half: dtype %d is not bf16 or f16", dtype);
  uint16_t *out = dst;
  if (dtype == DT_BF16) {
    for (int64_t i = 0; i < n; i++) out[i] = dt_f32_to_bf16(src[i]);
  } else {
    for (int64_t i = 0; i < n; i++) out[i] = dt_f32_to_f16(src[i]);
  }
  return DT_OK;
}

int dt_cast_half_f32(const void *src, int32_t dtype, float *dst, int64_t n) {
  CHECK_PTR(src); CHECK_PTR(dst); CHECK_COUNT(n);
  CHECK(dtype == DT_BF16 || dtype == DT_F16, "cast_half_f32: dtype %d is not bf16 or f16", dtype);
  const uint16_t *in = src;
  if (dtype == DT_BF16) {
    for (int64_t i = 0; i < n; i++) dst[i] = dt_bf16_to_f32(in[i]);
  } else {
    for (int64_t i = 0; i < n; i++) dst[i] = dt_f16_to_f32(in[i]);
  }
  return DT_OK;
}
