/* Fused optimizer updates over flat buffers, with PyTorch's exact update rules
 * (torch.optim.SGD and torch.optim.AdamW, single-tensor implementations). */
#include <math.h>

#include "dtrain.h"

typedef struct {
  float *param;
  const float *grad;
  float *momentum_buf;
  float lr, momentum, dampening, weight_decay;
  int32_t nesterov, first;
} sgd_t;

/* The update of elements [begin, end). The operands are distinct buffers (restrict), so that the
 * compiler hoists the conditions out of the loop and vectorises it. */
static void sgd_range(void *ctx, int64_t begin, int64_t end) {
  const sgd_t *s = ctx;
  float *restrict param = s->param, *restrict momentum_buf = s->momentum_buf;
  const float *restrict grad = s->grad;
  const float lr = s->lr, momentum = s->momentum, dampening = s->dampening;
  const float weight_decay = s->weight_decay;
  const int32_t nesterov = s->nesterov, first = s->first;
  for (int64_t i = begin; i < end; i++) {
    float g = grad[i];
    if (weight_decay != 0.0f) g += weight_decay * param[i];
    if (momentum != 0.0f) {
      float buf = first ? g : momentum * momentum_buf[i] + (1.0f - dampening) * g;
      momentum_buf[i] = buf;
      g = nesterov ? g + momentum * buf : buf;
    }
    param[i] -= lr * g;
  }
}

/* One SGD step. momentum_buf may be NULL when momentum == 0; first != 0 on the step that creates
 * the buffer (PyTorch then copies the gradient into it instead of applying dampening). */
int dt_sgd_step(float *param, const float *grad, float *momentum_buf, int64_t n, float lr,
                float momentum, float dampening, int32_t nesterov, float weight_decay, int32_t first) {
  CHECK_PTR(param); CHECK_PTR(grad); CHECK_COUNT(n);
  CHECK(momentum == 0.0f || momentum_buf != NULL, "dt_sgd_step: momentum %g needs a buffer", (double)momentum);
  sgd_t s = {param, grad, momentum_buf, lr, momentum, dampening, weight_decay, nesterov, first};
  dt_parallel_range(n, DT_MIN_RANGE, sgd_range, &s);
  return DT_OK;
}

typedef struct {
  float *param, *exp_avg, *exp_avg_sq;
  const float *grad;
  float beta1, beta2, eps, step_size, decay, bias_correction2_sqrt;
} adamw_t;

static void adamw_range(void *ctx, int64_t begin, int64_t end) {
  const adamw_t *a = ctx;
  float *param = a->param, *exp_avg = a->exp_avg, *exp_avg_sq = a->exp_avg_sq;
  const float *grad = a->grad;
  for (int64_t i = begin; i < end; i++) {
    float g = grad[i];
    param[i] *= a->decay;
    exp_avg[i] += (1.0f - a->beta1) * (g - exp_avg[i]);
    exp_avg_sq[i] = exp_avg_sq[i] * a->beta2 + (1.0f - a->beta2) * g * g;
    float denom = sqrtf(exp_avg_sq[i]) / a->bias_correction2_sqrt + a->eps;
    param[i] -= a->step_size * exp_avg[i] / denom;
  }
}

/* One AdamW step (decoupled weight decay); step is the 1-based step count after this update. */
int dt_adamw_step(float *param, const float *grad, float *exp_avg, float *exp_avg_sq, int64_t n,
                  float lr, float beta1, float beta2, float eps, float weight_decay, int64_t step) {
  CHECK_PTR(param); CHECK_PTR(grad); CHECK_PTR(exp_avg); CHECK_PTR(exp_avg_sq); CHECK_COUNT(n);
  CHECK(step >= 1, "dt_adamw_step: step %lld (must be >= 1)", (long long)step);
  adamw_t a = {param, exp_avg, exp_avg_sq, grad, beta1, beta2, eps,
               lr / (1.0f - powf(beta1, (float)step)), 1.0f - lr * weight_decay,
               sqrtf(1.0f - powf(beta2, (float)step))};
  dt_parallel_range(n, DT_MIN_RANGE, adamw_range, &a);
  return DT_OK;
}
