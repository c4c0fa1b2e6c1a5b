/* Fused cross-entropy of logits[rows, cols] against integer targets: PyTorch's F.cross_entropy with
 * ignore_index, label_smoothing and reduction, loss and gradient from one pass over the logits (no
 * [rows, cols] host-side weights, so 50k-class vocabularies cost only the logits themselves). */
#include <math.h>
#include <string.h>

#include "dtrain.h"
#include "fast_exp.h"
#include "rows.h"

/* Rows are split into at most this many tasks; the partial sums are added in task order, so the
 * loss does not depend on the thread count. */
#define MAX_TASKS 64

typedef struct {
  const float *logits; const int32_t *targets; int64_t rows, cols, rows_per_task;
  int32_t ignore_index; float smoothing, grad_scale;
  float *row_loss; /* per-row losses (reduction none), or NULL */
  float *grad;     /* d loss_r / d logits times grad_scale, or NULL */
  double partial[MAX_TASKS];
} ce_job;

static void ce_task(void *ctx, int64_t task) {
  ce_job *j = ctx;
  int64_t cols = j->cols, begin = task * j->rows_per_task, end = begin + j->rows_per_task;
  end = end < j->rows ? end : j->rows;
  float eps = j->smoothing, on = 1.0f - eps, off = eps / (float)cols;
  double total = 0.0;
  for (int64_t r = begin; r < end; r++) {
    const float *row = j->logits + r * cols;
    float *g = j->grad ? j->grad + r * cols : NULL;
    int32_t t = j->targets[r];
    if (t == j->ignore_index) {
      if (g) memset(g, 0, (size_t)cols * sizeof(float));
      if (j->row_loss) j->row_loss[r] = 0.0f;
      continue;
    }
    float max = dt_row_max(row, cols);
    double row_sum = eps ? dt_row_dot(row, NULL, cols) : 0.0;
    /* with a gradient the exponentials are kept in g, else they are only summed */
    double sum = g ? dt_exp_shift_sum(row, g, cols, max) : 0.0;
    if (!g) for (int64_t c = 0; c < cols; c++) sum += dt_expf(row[c] - max);
    double lse = max + log(sum);
    /* (1 - eps) * (lse - x_t) + eps * (lse - mean_c x_c) */
    double loss = on * (lse - row[t]) + (eps ? eps * (lse - row_sum / (double)cols) : 0.0);
    total += loss;
    if (j->row_loss) j->row_loss[r] = (float)loss;
    if (g) {
      float scale = (float)(1.0 / sum) * j->grad_scale, shift = off * j->grad_scale;
      for (int64_t c = 0; c < cols; c++) g[c] = g[c] * scale - shift;
      g[t] -= on * j->grad_scale;
    }
  }
  j->partial[task] = total;
}

/* loss: one float (mean over the rows not ignored, NaN when all are; or sum), or rows floats for
 * reduction none (0 on ignored rows). grad, when not NULL: d loss / d logits for an upstream
 * gradient of 1 (per row for none), finished by dt_cross_entropy_backward. */
int dt_cross_entropy(const float *logits, const int32_t *targets, int64_t rows, int64_t cols,
                     int32_t ignore_index, float label_smoothing, int32_t reduction, float *loss,
                     float *grad) {
  CHECK_PTR(logits); CHECK_PTR(targets); CHECK_PTR(loss);
  CHECK(rows >= 0 && cols > 0, "dt_cross_entropy: bad shape [%lld, %lld]", (long long)rows, (long long)cols);
  CHECK(reduction >= DT_REDUCTION_NONE && reduction <= DT_REDUCTION_SUM, "dt_cross_entropy: reduction %d", reduction);
  CHECK(label_smoothing >= 0.0f && label_smoothing <= 1.0f,
        "crossEntropy: labelSmoothing %g is outside [0, 1]", (double)label_smoothing);
  int64_t count = 0;
  for (int64_t r = 0; r < rows; r++) {
    int32_t t = targets[r];
    if (t == ignore_index) continue;
    CHECK(t >= 0 && t < cols, "crossEntropy: target %d at row %lld is out of range [0, %lld)", t,
          (long long)r, (long long)cols);
    count++;
  }
  ce_job j = {logits, targets, rows, cols, 1, ignore_index, label_smoothing,
              reduction == DT_REDUCTION_MEAN ? (count ? 1.0f / (float)count : NAN) : 1.0f,
              reduction == DT_REDUCTION_NONE ? loss : NULL, grad, {0}};
  int64_t per = 32768 / cols, even = (rows + MAX_TASKS - 1) / MAX_TASKS;
  j.rows_per_task = per > even ? per : even;
  j.rows_per_task = j.rows_per_task < 1 ? 1 : j.rows_per_task;
  int64_t tasks = (rows + j.rows_per_task - 1) / j.rows_per_task;
  dt_parallel(tasks, ce_task, &j);
  if (reduction == DT_REDUCTION_NONE) return DT_OK;
  double total = 0.0;
  for (int64_t i = 0; i < tasks; i++) total += j.partial[i];
  *loss = reduction == DT_REDUCTION_SUM ? (float)total : count ? (float)(total / (double)count) : NAN;
  return DT_OK;
}

/* gx = grad * gy[0] (reductions mean and sum), or gx[r, :] = grad[r, :] * gy[r] (none). */
int dt_cross_entropy_backward(const float *grad, const float *gy, float *gx, int64_t rows, int64_t cols,
                              int32_t per_row) {
  CHECK_PTR(grad); CHECK_PTR(gy); CHECK_PTR(gx);
  CHECK(rows >= 0 && cols > 0, "dt_cross_entropy_backward: bad shape");
  for (int64_t r = 0; r < rows; r++) {
    float s = gy[per_row ? r : 0];
    const float *in = grad + r * cols;
    float *out = gx + r * cols;
    for (int64_t c = 0; c < cols; c++) out[c] = in[c] * s;
  }
  return DT_OK;
}
