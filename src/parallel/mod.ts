/**
 * `parallel`: data-parallel training (PyTorch's `torch.nn.parallel` and FSDP2's `fully_shard`).
 * @module
 */

export * from "./ddp.ts";
export * from "./ddp_options.ts";
export * from "./mixed_precision.ts";
export * from "./fsdp/fully_shard.ts";
export * from "./fsdp/full_state_dict.ts";
export * from "./activation_checkpoint.ts";
export * from "./local_sgd.ts";
export * from "./diloco.ts";
export * from "./ft/mod.ts";

import type * as fsdp from "./fsdp/_common.ts";
/**
 * Options of `fullyShard`: the group or device mesh (HSDP on a 2-D one), `reshardAfterForward`
 * and the mixed-precision policy.
 */
export type FullyShardOptions = fsdp.FullyShardOptions;
/** Communication of an FSDP module's last synchronised step (as DDP's `lastStats`). */
export type FSDPStats = fsdp.FSDPStats;

// Named here, as FSDP's above: deno doc lists no type re-exported by name into a namespace.
import type * as managerOptions from "./ft/manager_options.ts";
import type * as heal from "./ft/heal.ts";
import type * as quorum from "./ft/quorum.ts";
/** Options of `Manager.connect`. */
export type ManagerOptions = managerOptions.ManagerOptions;
/** State a replica shares with one that heals (torchft's `register_state_dict_fn`). */
export type ReplicaState = heal.ReplicaState;
/** A decided quorum: the replicas that take the next step together. */
export type Quorum = quorum.Quorum;
/** A replica as it enters a quorum round. */
export type QuorumMember = quorum.QuorumMember;
export * from "./tensor_parallel/mod.ts";
export * from "./pipelining/mod.ts";
