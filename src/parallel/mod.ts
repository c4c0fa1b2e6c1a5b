/**
 * `parallel`: data-parallel training (PyTorch's `torch.nn.parallel`).
 * @module
 */

export * from "./ddp.ts";
export * from "./mixed_precision.ts";
