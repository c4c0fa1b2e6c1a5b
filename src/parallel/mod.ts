/**
 * `parallel`: data-parallel training (PyTorch's `torch.nn.parallel` and FSDP2's `fully_shard`).
 * @module
 */

export * from "./ddp.ts";
export * from "./mixed_precision.ts";
export type { FSDPStats, FullyShardOptions } from "./fsdp/_common.ts";
export { type FSDPMethods, type FSDPModule, fullyShard, localShard } from "./fsdp/fully_shard.ts";
export { fullStateDict } from "./fsdp/full_state_dict.ts";
