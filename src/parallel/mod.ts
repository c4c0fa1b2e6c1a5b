/**
 * `parallel`: data-parallel training (PyTorch's `torch.nn.parallel`).
 * @module
 */

export { type DDPOptions, type DDPStats, DistributedDataParallel } from "./ddp.ts";
