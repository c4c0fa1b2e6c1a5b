/* Fused optimizer updates over flat buffers, with PyTorch's exact update rules
 * (torch.optim.SGD and torch.optim.AdamW, single-tensor implementations). */
#include <math.h>

#include "dtrain.h"

/* One SGD step. momentum_buf may be NULL when momentum == 0; first != 0 on the step that creates
 * the buffer (PyTorch then copies the gradient into it instead of applying dampening). */
int dt_sgd_step(float *param, const float *grad, float *momentum_buf, int64_t n, float lr,
                float momentum, float dampening, int32_t nesterov, float weight_decay, int32_t first) {
  CHECK_PTR(param); CHECK_PTR(grad); CHECK_COUNT(n);
  CHECK(momentum == 0.0f || momentum_buf != NULL, "dt_sgd_step: momentum %g needs a buffer", (double)momentum);
  for (int64_t i = 0; i < n; i++) {
    float g = grad[i];
    if (weight_decay != 0.0f) g += weight_decay * param[i];
    if (momentum != 0.0f) {
      float buf = first ? g : momentum * momentum_buf[i] + (1.0f - dampening) * g;
      momentum_buf[i] = buf;
      g = nesterov ? g + momentum * buf : buf;
    }
    param[i] -= lr * g;
  }
  return DT_OK;
}

/* One AdamW step (decoupled weight decay); step is the 1-based step count after this update. */
int dt_adamw_step(float *param, const float *grad, float *exp_avg, float *exp_avg_sq, int64_t n,
                  float lr, float beta1, float beta2, float eps, float weight_decay, int64_t step) {
  CHECK_PTR(param); CHECK_PTR(grad); CHECK_PTR(exp_avg); CHECK_PTR(exp_avg_sq); CHECK_COUNT(n);
  CHECK(step >= 1, "dt_adamw_step: step %lld (must be >= 1)", (long long)step);
  float bias_correction1 = 1.0f - powf(beta1, (float)step);
  float bias_correction2_sqrt = sqrtf(1.0f - powf(beta2, (float)step));
  float step_size = lr / bias_correction1;
  float decay = 1.0f - lr * weight_decay;
  for (int64_t i = 0; i < n; i++) {
    float g = grad[i];
    param[i] *= decay;
    exp_avg[i] += (1.0f - beta1) * (g - exp_avg[i]);
    exp_avg_sq[i] = exp_avg_sq[i] * beta2 + (1.0f - beta2) * g * g;
    float denom = sqrtf(exp_avg_sq[i]) / bias_correction2_sqrt + eps;
    param[i] -= step_size * exp_avg[i] / denom;
  }
  return DT_OK;
}
