/**
 * `nn.utils`: helpers around modules and their gradients (PyTorch's `torch.nn.utils`).
 * @module
 */

export * from "./clip_grad.ts";
export * from "./checkpoint.ts";
