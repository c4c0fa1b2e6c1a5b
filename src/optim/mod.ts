/**
 * `optim`: optimizers and learning-rate schedules (PyTorch's `torch.optim`).
 * @module
 */

export {
  Optimizer,
  type OptimizerStateDict,
  type ParamGroup,
  type ParamState,
} from "./optimizer.ts";
export { SGD, type SGDOptions } from "./sgd.ts";
export { AdamW, type AdamWOptions } from "./adamw.ts";
export { Adam, type AdamOptions } from "./adam.ts";
export {
  CosineWithWarmup,
  cosineWithWarmup,
  type CosineWithWarmupOptions,
  LambdaLR,
  LRScheduler,
  type LRSchedulerState,
  StepLR,
  type StepLROptions,
} from "./lr_scheduler.ts";
