/**
 * `parallel`: data-parallel training (PyTorch's `torch.nn.parallel`).
 * @module
 */

export * from "./ddp.ts";
