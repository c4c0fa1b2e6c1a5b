/* Reductions over one axis of a contiguous tensor viewed as [outer, axis, inner], the broadcast
 * that is their backward, and row-wise argmax. A reduction over all elements is outer = inner = 1. */
#include "dtrain.h"

/* out[o, i] = scale * sum_a x[o, a, i]; accumulates in double. */
int dt_sum_axis(const float *x, float *out, int64_t outer, int64_t axis, int64_t inner, float scale) {
  CHECK_PTR(x); CHECK_PTR(out);
  CHECK(outer >= 0 && axis >= 0 && inner >= 0, "dt_sum_axis: negative size");
  if (inner == 1) {
    for (int64_t o = 0; o < outer; o++) {
      const float *row = x + o * axis;
      double acc = 0.0;
      for (int64_t a = 0; a < axis; a++) acc += row[a];
      out[o] = (float)(acc * scale);
    }
    return DT_OK;
  }
  for (int64_t o = 0; o < outer; o++) {
    float *dst = out + o * inner;
    for (int64_t i = 0; i < inner; i++) dst[i] = 0.0f;
    for (int64_t a = 0; a < axis; a++) {
      const float *src = x + (o * axis + a) * inner;
      for (int64_t i = 0; i < inner; i++) dst[i] += src[i];
    }
    for (int64_t i = 0; i < inner; i++) dst[i] *= scale;
  }
  return DT_OK;
}

/* gx[o, a, i] = scale * gy[o, i]: the backward of dt_sum_axis. */
int dt_expand_axis(const float *gy, float *gx, int64_t outer, int64_t axis, int64_t inner, float scale) {
  CHECK_PTR(gy); CHECK_PTR(gx);
  CHECK(outer >= 0 && axis >= 0 && inner >= 0, "dt_expand_axis: negative size");
  for (int64_t o = 0; o < outer; o++)
    for (int64_t a = 0; a < axis; a++) {
      float *dst = gx + (o * axis + a) * inner;
      const float *src = gy + o * inner;
      for (int64_t i = 0; i < inner; i++) dst[i] = scale * src[i];
    }
  return DT_OK;
}

/* out[r] = index of the largest of x[r, :] (the first one on ties, like PyTorch). */
int dt_argmax_rows(const float *x, int32_t *out, int64_t rows, int64_t cols) {
  CHECK_PTR(x); CHECK_PTR(out);
  CHECK(rows >= 0 && cols > 0, "dt_argmax_rows: bad shape [%lld, %lld]", (long long)rows, (long long)cols);
  for (int64_t r = 0; r < rows; r++) {
    const float *row = x + r * cols;
    int64_t best = 0;
    for (int64_t c = 1; c < cols; c++) if (row[c] > row[best]) best = c;
    out[r] = (int32_t)best;
  }
  return DT_OK;
}

/* Each square rounded to float (as x * x is), summed in double over eight independent lanes, which
 * the compiler vectorises (one chain of double adds would run at a quarter of the speed), then the
 * lanes in order: the same value for the same input whatever the thread count. */
int dt_sum_squares(const float *x, int64_t n, float *out) {
  CHECK_PTR(x); CHECK_PTR(out); CHECK_COUNT(n);
  double lane[8] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int l = 0; l < 8; l++) {
      float square = x[i + l] * x[i + l];
      lane[l] += (double)square;
    }
  }
  double acc = 0.0;
  for (; i < n; i++) {
    float square = x[i] * x[i];
    acc += (double)square;
  }
  for (int l = 0; l < 8; l++) acc += lane[l];
  *out = (float)acc;
  return DT_OK;
}
