/* Row reductions in a form the compiler vectorises: eight independent lanes, combined at the end
 * (a plain running max or sum is a reduction that -O3 leaves scalar without -ffast-math). */
#ifndef DTRAIN_ROWS_H
#define DTRAIN_ROWS_H

#include <stdint.h>

/* The largest element; a NaN is kept only when it comes first, as in the scalar loops before. */
static inline float dt_row_max(const float *x, int64_t n) {
  float lane[8];
  for (int l = 0; l < 8; l++) lane[l] = x[0];
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int l = 0; l < 8; l++) lane[l] = x[i + l] > lane[l] ? x[i + l] : lane[l];
  }
  float max = lane[0];
  for (int l = 1; l < 8; l++) max = lane[l] > max ? lane[l] : max;
  for (; i < n; i++) max = x[i] > max ? x[i] : max;
  return max;
}

/* sum_i x[i] * y[i] (y may be NULL: sum_i x[i]), accumulated in double lanes. */
static inline double dt_row_dot(const float *x, const float *y, int64_t n) {
  double lane[8] = {0};
  int64_t i = 0;
  if (y) {
    for (; i + 8 <= n; i += 8)
      for (int l = 0; l < 8; l++) lane[l] += (double)x[i + l] * y[i + l];
  } else {
    for (; i + 8 <= n; i += 8)
      for (int l = 0; l < 8; l++) lane[l] += x[i + l];
  }
  double acc = 0.0;
  for (int l = 0; l < 8; l++) acc += lane[l];
  for (; i < n; i++) acc += y ? (double)x[i] * y[i] : x[i];
  return acc;
}

/* sum_i (x[i] - mu)^2, accumulated in double lanes (the variance's second pass). */
static inline double dt_row_sq_dev(const float *x, double mu, int64_t n) {
  double lane[8] = {0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; l++) {
      double d = x[i + l] - mu;
      lane[l] += d * d;
    }
  double acc = 0.0;
  for (int l = 0; l < 8; l++) acc += lane[l];
  for (; i < n; i++) acc += (x[i] - mu) * (x[i] - mu);
  return acc;
}

#endif
