/* Order-based kernels and their backwards: clamp, abs, elementwise maximum/minimum, and the largest
 * or smallest element of each row with its index. NaN propagates as in PyTorch: a NaN operand is
 * the result of maximum/minimum and the extreme of its row. */
#include <math.h>
#include <string.h>

#include "dtrain.h"

/* y = min(max(x, lo), hi); pass -inf / +inf for a missing bound. lo > hi gives hi, like PyTorch. */
int dt_clamp(const float *x, float *y, int64_t n, float lo, float hi) {
  CHECK_PTR(x); CHECK_PTR(y); CHECK_COUNT(n);
  for (int64_t i = 0; i < n; i++) {
    float v = x[i] < lo ? lo : x[i];
    y[i] = v > hi ? hi : v;
  }
  return DT_OK;
}

/* y = min(max(x, lo), hi) as dt_clamp, except that NaN stays NaN: the clamp `clamp_` runs in
 * place. */
int dt_clamp_range(const float *x, float *y, int64_t n, float lo, float hi) {
  CHECK_PTR(x); CHECK_PTR(y); CHECK_COUNT(n);
  for (int64_t i = 0; i < n; i++) {
    float v = x[i];
    y[i] = v < lo ? lo : v > hi ? hi : v;
  }
  return DT_OK;
}

/* gx = gy where lo <= x <= hi (both ends included, like PyTorch), else 0. */
int dt_clamp_backward(const float *x, const float *gy, float *gx, int64_t n, float lo, float hi) {
  CHECK_PTR(x); CHECK_PTR(gy); CHECK_PTR(gx); CHECK_COUNT(n);
  for (int64_t i = 0; i < n; i++) gx[i] = x[i] >= lo && x[i] <= hi ? gy[i] : 0.0f;
  return DT_OK;
}

int dt_abs(const float *x, float *y, int64_t n) {
  CHECK_PTR(x); CHECK_PTR(y); CHECK_COUNT(n);
  for (int64_t i = 0; i < n; i++) y[i] = fabsf(x[i]);
  return DT_OK;
}

/* gx = sign(x) * gy, with sign(0) = 0 as PyTorch. */
int dt_abs_backward(const float *x, const float *gy, float *gx, int64_t n) {
  CHECK_PTR(x); CHECK_PTR(gy); CHECK_PTR(gx); CHECK_COUNT(n);
  for (int64_t i = 0; i < n; i++) gx[i] = x[i] > 0.0f ? gy[i] : x[i] < 0.0f ? -gy[i] : 0.0f;
  return DT_OK;
}

/* out = maximum(a, b) (minimum when is_min) over n elements of equal shape. */
int dt_maximum(const float *a, const float *b, float *out, int64_t n, int32_t is_min) {
  CHECK_PTR(a); CHECK_PTR(b); CHECK_PTR(out); CHECK_COUNT(n);
  for (int64_t i = 0; i < n; i++) {
    float x = a[i], y = b[i];
    int first = is_min ? x < y : x > y;
    out[i] = first || x != x ? x : y;
  }
  return DT_OK;
}

/* The gradients of dt_maximum (ga, gb nullable): the upstream goes to the operand chosen, halved
 * between the two on ties, as PyTorch does. */
int dt_maximum_backward(const float *a, const float *b, const float *gy, float *ga, float *gb,
                        int64_t n, int32_t is_min) {
  CHECK_PTR(a); CHECK_PTR(b); CHECK_PTR(gy); CHECK_COUNT(n);
  for (int64_t i = 0; i < n; i++) {
    float x = a[i], y = b[i];
    float share = x == y ? 0.5f : (is_min ? x < y : x > y) || x != x ? 1.0f : 0.0f;
    if (ga) ga[i] = gy[i] * share;
    if (gb) gb[i] = gy[i] * (x == y ? 0.5f : 1.0f - share);
  }
  return DT_OK;
}

/* values[r], indices[r] = the largest (smallest when is_min) of x[r, :] and its index: the first
 * on ties, or the first NaN. indices may be NULL. */
int dt_max_rows(const float *x, float *values, int32_t *indices, int64_t rows, int64_t cols,
                int32_t is_min) {
  CHECK_PTR(x); CHECK_PTR(values);
  CHECK(rows >= 0 && cols > 0, "dt_max_rows: bad shape [%lld, %lld]", (long long)rows, (long long)cols);
  for (int64_t r = 0; r < rows; r++) {
    const float *row = x + r * cols;
    int64_t best = 0;
    for (int64_t c = 1; c < cols && row[best] == row[best]; c++) {
      float v = row[c];
      if (v != v || (is_min ? v < row[best] : v > row[best])) best = c;
    }
    values[r] = row[best];
    if (indices) indices[r] = (int32_t)best;
  }
  return DT_OK;
}

/* gx[r, :] = 0 except gx[r, indices[r]] = gy[r]: the backward of max/min over a dimension. */
int dt_index_rows_backward(const float *gy, const int32_t *indices, float *gx, int64_t rows, int64_t cols) {
  CHECK_PTR(gy); CHECK_PTR(indices); CHECK_PTR(gx);
  CHECK(rows >= 0 && cols > 0, "dt_index_rows_backward: bad shape");
  memset(gx, 0, (size_t)(rows * cols) * sizeof(float));
  for (int64_t r = 0; r < rows; r++) {
    int32_t k = indices[r];
    CHECK(k >= 0 && k < cols, "dt_index_rows_backward: index %d out of range [0, %lld)", k, (long long)cols);
    gx[r * cols + k] = gy[r];
  }
  return DT_OK;
}

/* gx = gy[0] / count where x equals *value, else 0: the backward of a max/min over all elements,
 * shared evenly between the ties as PyTorch does. */
int dt_extreme_backward(const float *x, const float *value, const float *gy, float *gx, int64_t n) {
  CHECK_PTR(x); CHECK_PTR(value); CHECK_PTR(gy); CHECK_PTR(gx); CHECK_COUNT(n);
  float v = *value;
  int nan = v != v;
  int64_t count = 0;
  for (int64_t i = 0; i < n; i++) count += nan ? x[i] != x[i] : x[i] == v;
  float share = count ? gy[0] / (float)count : 0.0f;
  for (int64_t i = 0; i < n; i++) gx[i] = (nan ? x[i] != x[i] : x[i] == v) ? share : 0.0f;
  return DT_OK;
}
