/* Fused optimizer updates with csrc/core/optim.c's prototypes and rules (PyTorch's single-tensor
 * SGD and AdamW). */
#include "internal.cuh"

__global__ void sgd_kernel(float *param, const float *grad, float *momentum_buf, int64_t n,
                           float lr, float momentum, float dampening, int32_t nesterov,
                           float weight_decay, int32_t first) {
  GRID_LOOP(i, n) {
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

DT_EXPORT int dt_sgd_step(float *param, const float *grad, float *momentum_buf, int64_t n,
                          float lr, float momentum, float dampening, int32_t nesterov,
                          float weight_decay, int32_t first) {
  CHECK_PTR(param); CHECK_PTR(grad); CHECK_COUNT(n);
  CHECK(momentum == 0.0f || momentum_buf != NULL, "dt_sgd_step: momentum %g needs a buffer",
        (double)momentum);
  CURRENT(dev);
  if (n > 0)
    LAUNCH(dev, n, sgd_kernel, param, grad, momentum_buf, n, lr, momentum, dampening, nesterov,
           weight_decay, first);
  return DT_OK;
}

__global__ void adamw_kernel(float *param, const float *grad, float *exp_avg, float *exp_avg_sq,
                             int64_t n, float beta1, float beta2, float eps, float step_size,
                             float decay, float bias_correction2_sqrt) {
  GRID_LOOP(i, n) {
    float g = grad[i], p = param[i] * decay;
    float m = exp_avg[i] + (1.0f - beta1) * (g - exp_avg[i]);
    float v = exp_avg_sq[i] * beta2 + (1.0f - beta2) * g * g;
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
    param[i] = p - step_size * m / (sqrtf(v) / bias_correction2_sqrt + eps);
  }
}

DT_EXPORT int dt_adamw_step(float *param, const float *grad, float *exp_avg, float *exp_avg_sq,
                            int64_t n, float lr, float beta1, float beta2, float eps,
                            float weight_decay, int64_t step) {
  CHECK_PTR(param); CHECK_PTR(grad); CHECK_PTR(exp_avg); CHECK_PTR(exp_avg_sq); CHECK_COUNT(n);
  CHECK(step >= 1, "dt_adamw_step: step %lld (must be >= 1)", (long long)step);
  float bias_correction1 = 1.0f - powf(beta1, (float)step);
  float bias_correction2_sqrt = sqrtf(1.0f - powf(beta2, (float)step));
  CURRENT(dev);
  if (n > 0)
    LAUNCH(dev, n, adamw_kernel, param, grad, exp_avg, exp_avg_sq, n, beta1, beta2, eps,
           lr / bias_correction1, 1.0f - lr * weight_decay, bias_correction2_sqrt);
  return DT_OK;
}
