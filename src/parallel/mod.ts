/**
 * `parallel`: data-parallel training (PyTorch's `torch.nn.parallel` and FSDP2's `fully_shard`).
 * @module
 */

export { type DDPOptions, type DDPStats, DistributedDataParallel } from "./ddp.ts";
export type { FSDPStats, FullyShardOptions, MixedPrecisionPolicy } from "./fsdp/_common.ts";
export { type FSDPMethods, type FSDPModule, fullyShard, localShard } from "./fsdp/fully_shard.ts";
export { fullStateDict } from "./fsdp/full_state_dict.ts";
