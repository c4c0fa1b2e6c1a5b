/**
 * `nn.utils`: helpers around modules and their gradients (PyTorch's `torch.nn.utils`).
 * @module
 */

export { clipGradNorm, type ClipGradNormOptions } from "./clip_grad.ts";
