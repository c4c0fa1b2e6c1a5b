/**
 * `optim`: optimizers and learning-rate schedules (PyTorch's `torch.optim`).
 * @module
 */

export * from "./optimizer.ts";
export * from "./sgd.ts";
export * from "./adamw.ts";
export * from "./adam.ts";
export * from "./lr_scheduler.ts";
