/* exp over float arrays in a form the compiler vectorises (libm's expf is a scalar call per element
 * and dominated softmax and attention). Cody-Waite range reduction and a degree-6 polynomial:
 * relative error under 2 ulp on the range; exactly 0 below -87.3 (so -inf gives 0), +inf above
 * 88.37 (a little early: exp(88.72) is the largest float). NaN propagates. */
#ifndef DTRAIN_FAST_EXP_H
#define DTRAIN_FAST_EXP_H

#include <stdint.h>
#include <string.h>

/* exp(xc) for xc already clamped to [-87.3, 88.37]: the reduction and polynomial both exps share. */
static inline float dt_exp_clamped(float xc) {
  const float log2e = 1.44269504088896341f, ln2_hi = 0.693359375f, ln2_lo = -2.12194440e-4f;
  /* round to nearest by the 1.5 * 2^23 trick (vectorises, unlike roundf) */
  float n = (xc * log2e + 12582912.0f) - 12582912.0f;
  float r = xc - n * ln2_hi - n * ln2_lo;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  int32_t bits = ((int32_t)n + 127) << 23;
  float scale;
  memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

static inline float dt_expf(float x) {
  float y = dt_exp_clamped(x < -87.3f ? -87.3f : (x > 88.37f ? 88.37f : x));
  y = x < -87.3f ? 0.0f : y;
  y = x > 88.37f ? __builtin_inff() : y;
  return x != x ? x : y;
}

/* exp(x) for x <= 0 (erf's and the normal density's argument): dt_expf without the overflow
 * and NaN selects it cannot need (a NaN still comes out as NaN), a third fewer instructions. */
static inline float dt_exp_nonpos(float x) {
  return x < -87.3f ? 0.0f : dt_exp_clamped(x < -87.3f ? -87.3f : x);
}

/* erf(a) for a >= 0 given e = exp(-a * a): Abramowitz & Stegun 7.1.26 (absolute error under
 * 1.5e-7), the approximation PyTorch's own vectorised CPU erf and exact GELU use. Taking e from
 * the caller lets GELU's gradient share it with the normal density, which is the same exp. */
static inline float dt_erf_nonneg(float a, float e) {
  float t = 1.0f / (1.0f + 0.3275911f * a);
  float r = 1.061405429f;
  r = r * t - 1.453152027f;
  r = r * t + 1.421413741f;
  r = r * t - 0.284496736f;
  r = r * t + 0.254829592f;
  return 1.0f - r * t * e;
}

/* erf in a form the compiler vectorises. */
static inline float dt_erff(float x) {
  float a = x < 0.0f ? -x : x;
  float y = dt_erf_nonneg(a, dt_exp_nonpos(-a * a));
  return x < 0.0f ? -y : y;
}

/* y[i] = exp(x[i] - shift) (y may be x); returns the sum. */
static inline double dt_exp_shift_sum(const float *x, float *y, int64_t n, float shift) {
  for (int64_t i = 0; i < n; i++) y[i] = dt_expf(x[i] - shift);
  float acc[8] = {0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int l = 0; l < 8; l++) acc[l] += y[i + l];
  }
  double sum = 0.0;
  for (int l = 0; l < 8; l++) sum += acc[l];
  for (; i < n; i++) sum += y[i];
  return sum;
}

#endif
