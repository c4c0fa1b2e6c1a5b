/* The largest element of a float row in a form the compiler vectorises: eight independent lanes
 * (a plain running max is a reduction that -O3 leaves scalar without -ffast-math). A NaN is kept
 * only when it comes first, as in the scalar loops this replaces. */
#ifndef DTRAIN_ROW_MAX_H
#define DTRAIN_ROW_MAX_H

#include <stdint.h>

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

#endif
