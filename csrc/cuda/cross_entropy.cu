/* Fused cross-entropy with csrc/core/cross_entropy.c's prototypes and semantics: PyTorch's
 * F.cross_entropy with ignore_index, label_smoothing eps and reduction;
 * loss_r = (1 - eps)(lse - x_t) + eps (lse - mean_c x_c). Row kernels run one block per row; a
 * class target out of range is reported at the next synchronisation (see [Note: device-side
 * errors] in internal.cuh). */
#include "internal.cuh"

/* Per row: its loss (0 when ignored), and its log-sum-exp (NaN marks an ignored row). */
__global__ void ce_rows_kernel(const float *logits, const int32_t *targets, int64_t cols,
                               int32_t ignore_index, float eps, float *row_loss, float *row_lse,
                               dt_device_error_t *err) {
  __shared__ float shared[32];
  int64_t r = blockIdx.x;
  const float *row = logits + r * cols;
  int32_t t = targets[r];
  bool ignored = t == ignore_index, bad = !ignored && (t < 0 || t >= cols);
  if (ignored || bad) {
    if (threadIdx.x == 0) {
      row_loss[r] = 0.0f;
      row_lse[r] = NAN;
      if (bad) dt_report_device_error(err, DT_DEVERR_TARGET, t, r, cols);
    }
    return;
  }
  float max = -INFINITY, total = 0.0f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    max = fmaxf(max, row[c]);
    total += row[c];
  }
  max = block_max(max, shared);
  total = eps != 0.0f ? block_sum(total, shared) : 0.0f;
  float sum = 0.0f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) sum += expf(row[c] - max);
  sum = block_sum(sum, shared);
  if (threadIdx.x == 0) {
    float lse = max + logf(sum);
    row_lse[r] = lse;
    row_loss[r] = (1.0f - eps) * (lse - row[t]) + (eps != 0.0f ? eps * (lse - total / (float)cols) : 0.0f);
  }
}

/* Pass one of [Note: two-pass reductions]: each block's sum of row losses and count of rows not
 * ignored. */
__global__ void ce_partials_kernel(const float *row_loss, const float *row_lse, int64_t rows,
                                   float *loss_part, long long *count_part) {
  __shared__ float shared[32];
  __shared__ long long shared_count[32];
  float total = 0.0f;
  long long count = 0;
  GRID_LOOP(r, rows) {
    total += row_loss[r];
    count += isnan(row_lse[r]) ? 0 : 1;
  }
  total = block_sum(total, shared);
  count = block_sum(count, shared_count);
  if (threadIdx.x != 0) return;
  loss_part[blockIdx.x] = total;
  count_part[blockIdx.x] = count;
}

/* Pass two, one block: the reduced loss (mean over counted rows, NaN when none; or sum), and the
 * scale of the gradient (1 / count for mean, else 1). Reduction none leaves `loss` to
 * ce_rows_kernel. */
__global__ void ce_total_kernel(const float *loss_part, const long long *count_part,
                                int64_t blocks, int reduction, float *loss, float *grad_scale) {
  __shared__ float shared[32];
  __shared__ long long shared_count[32];
  float total = sum_partials(loss_part, blocks, shared);
  long long count = sum_partials(count_part, blocks, shared_count);
  if (threadIdx.x != 0) return;
  if (reduction == DT_REDUCTION_MEAN) {
    *loss = count > 0 ? total / (float)count : NAN;
    *grad_scale = count > 0 ? 1.0f / (float)count : NAN;
  } else {
    if (reduction == DT_REDUCTION_SUM) *loss = total;
    *grad_scale = 1.0f;
  }
}

__global__ void ce_grad_kernel(const float *logits, const int32_t *targets, int64_t rows,
                               int64_t cols, float eps, const float *row_lse,
                               const float *grad_scale, float *grad) {
  GRID_LOOP(i, rows * cols) {
    int64_t r = i / cols, c = i % cols;
    float lse = row_lse[r], scale = *grad_scale;
    if (isnan(lse)) {
      grad[i] = 0.0f;
      continue;
    }
    float g = expf(logits[i] - lse) * scale - eps / (float)cols * scale;
    grad[i] = c == targets[r] ? g - (1.0f - eps) * scale : g;
  }
}

DT_EXPORT int dt_cross_entropy(const float *logits, const int32_t *targets, int64_t rows,
                               int64_t cols, int32_t ignore_index, float label_smoothing,
                               int32_t reduction, float *loss, float *grad) {
  CHECK_PTR(logits); CHECK_PTR(targets); CHECK_PTR(loss);
  CHECK(rows >= 0 && rows <= ROWS_MAX && cols > 0, "dt_cross_entropy: bad shape [%lld, %lld]",
        (long long)rows, (long long)cols);
  CHECK(reduction >= DT_REDUCTION_NONE && reduction <= DT_REDUCTION_SUM, "dt_cross_entropy: reduction %d", reduction);
  CHECK(label_smoothing >= 0.0f && label_smoothing <= 1.0f,
        "crossEntropy: labelSmoothing %g is outside [0, 1]", (double)label_smoothing);
  CURRENT(dev);
  /* Scratch: the i64 count partials first (aligned as the allocation is), then f32s. */
  unsigned blocks = partial_blocks(rows);
  void *scratch;
  int st = dt_cuda_scratch(dev, blocks * (int64_t)sizeof(long long) +
                                    (2 * rows + 1 + blocks) * (int64_t)sizeof(float),
                           &scratch);
  if (st != DT_OK) return st;
  long long *count_part = (long long *)scratch;
  float *row_lse = (float *)(count_part + blocks), *grad_scale = row_lse + rows;
  float *loss_part = grad_scale + 1;
  float *row_loss = reduction == DT_REDUCTION_NONE ? loss : loss_part + blocks;
  if (rows > 0) {
    GRID_LAUNCH(ce_rows_kernel, (unsigned)rows, THREADS, 0, dev->compute)(
        logits, targets, cols, ignore_index, label_smoothing, row_loss, row_lse, dev->error);
  }
  GRID_LAUNCH(ce_partials_kernel, blocks, THREADS, 0, dev->compute)(row_loss, row_lse, rows, loss_part,
                                                           count_part);
  GRID_LAUNCH(ce_total_kernel, 1, THREADS, 0, dev->compute)(loss_part, count_part, blocks, reduction, loss,
                                                   grad_scale);
  if (grad && rows > 0) {
    GRID_LAUNCH(ce_grad_kernel, blocks_for(rows * cols), THREADS, 0, dev->compute)(
        logits, targets, rows, cols, label_smoothing, row_lse, grad_scale, grad);
  }
  dt_cuda_scratch_free(dev, scratch);
  LAUNCH_CHECK();
  return DT_OK;
}

/* gx = grad * gy[0] (mean, sum), or gx[r, :] = grad[r, :] * gy[r] (none). */
__global__ void ce_backward_kernel(const float *grad, const float *gy, float *gx, int64_t rows,
                                   int64_t cols, int per_row) {
  GRID_LOOP(i, rows * cols) gx[i] = grad[i] * gy[per_row ? i / cols : 0];
}

DT_EXPORT int dt_cross_entropy_backward(const float *grad, const float *gy, float *gx,
                                        int64_t rows, int64_t cols, int32_t per_row) {
  CHECK_PTR(grad); CHECK_PTR(gy); CHECK_PTR(gx);
  CHECK(rows >= 0 && cols > 0, "dt_cross_entropy_backward: bad shape");
  CURRENT(dev);
  if (rows > 0) LAUNCH(dev, rows * cols, ce_backward_kernel, grad, gy, gx, rows, cols, per_row);
  return DT_OK;
}
