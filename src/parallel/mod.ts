/**
 * `parallel`: data-parallel and sharded training (PyTorch's `torch.nn.parallel` and FSDP).
 * @module
 */

export { type DDPOptions, type DDPStats, DistributedDataParallel } from "./ddp.ts";
