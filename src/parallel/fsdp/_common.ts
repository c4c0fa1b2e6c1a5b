/**
 * What the FSDP files share: the named states (FSDP2's `_fsdp_common.py`), the options, and the
 * dim-0 shard arithmetic.
 * @module
 */

import type { DeviceMesh, ProcessGroup } from "../../distributed/mod.ts";

/** Whether a parameter group's full parameters exist (FSDP2's `ShardedState`). */
export enum ShardedState {
  /** Only this rank's shard exists; the full parameters' memory is freed. */
  Sharded = "sharded",
  /** The all-gather is in flight into a staging buffer. */
  Gathering = "gathering",
  /** The full parameters are in place and the module's attributes point to them. */
  Unsharded = "unsharded",
}

/** Where a parameter group is in a training step (FSDP2's `TrainingState`). */
export enum TrainingState {
  /** Between steps. */
  Idle = "idle",
  /** Inside the group's forward. */
  Forward = "forward",
  /** Backward reached the group's outputs; its gradients are being computed. */
  PreBackward = "preBackward",
  /** The group's gradients were reduced (or accumulated under noSync). */
  PostBackward = "postBackward",
}

/**
 * FSDP2's mixed-precision policy, the one DDP takes too (see [Note: mixed precision] in
 * ../mixed_precision.ts): f32 shards, gathered in `paramDtype`, gradients reduced in `reduceDtype`.
 */
export type { MixedPrecisionPolicy } from "../mixed_precision.ts";
import type { MixedPrecisionPolicy } from "../mixed_precision.ts";

/** Options of `fullyShard`. */
export interface FullyShardOptions {
  /** The process group to shard over (default: the world). Not with `mesh`. */
  group?: ProcessGroup;
  /**
   * The device mesh to shard over, as FSDP2's `mesh` (not with `group`): a 1-D mesh shards over
   * its group; a 2-D one (replicate, shard) is HSDP: parameters are sharded along dim 1,
   * gradients reduce-scattered along it and then averaged (all-reduced) across dim 0, whose
   * ranks hold equal replicas. Slice an N-D mesh first: `mesh.get(["dp_replicate", "dp_shard"])`.
   */
  mesh?: DeviceMesh;
  /**
   * Free the full parameters after the module's forward and gather them again for its backward
   * (default true: least memory). False keeps them until backward (FSDP's SHARD_GRAD_OP). The
   * root's own parameters are always kept, as in FSDP2, since its backward comes first.
   */
  reshardAfterForward?: boolean;
  /**
   * Start this module's all-gather ahead in forward, while the module that ran forward before it
   * (in the previous step) computes (default true; FSDP1's `forward_prefetch`). False gathers it
   * only when its forward starts, which keeps one group fewer of full parameters in memory and
   * exposes the whole gather. Needs a backend that can start an all-gather on a native thread
   * (Gloo, shared memory); with the others (NCCL), forward never prefetches.
   */
  forwardPrefetch?: boolean;
  /**
   * FSDP2's mixed precision (see {@linkcode MixedPrecisionPolicy}): `{ paramDtype: "bf16" }`
   * gathers bf16 parameters (half the bytes) for forward and backward and reduce-scatters bf16
   * gradients into the f32 shards' `.grad`, on every device.
   */
  mpPolicy?: MixedPrecisionPolicy;
}

/** Communication of the last synchronised step, to see how much of it was hidden. */
export interface FSDPStats {
  /**
   * Milliseconds the forward spent blocked on its all-gathers since the previous synchronised
   * backward: waiting for a prefetched one (only what was not hidden behind the previous group's
   * compute), gathering one that was not, and starting the next.
   */
  forwardCommMs: number;
  /** Milliseconds of the backward pass, waits on gathers included. */
  backwardMs: number;
  /** Milliseconds waiting for communication (gathers in backward and the final reduce-scatters). */
  exposedCommMs: number;
  /** All-gathers issued (forward and backward). */
  allGathers: number;
  /**
   * Forward all-gathers started ahead, while the group before computed (counted in `allGathers`
   * too). Zero in the first step, whose forward order is not known yet, and with a backend that
   * cannot start an all-gather on a thread (`ProcessGroup.canStartAllGather`).
   */
  forwardPrefetches: number;
  /** Reduce-scatters issued. */
  reduceScatters: number;
  /**
   * Bytes of the all-gathers issued (forward and backward): each one's output, group size × the
   * flat shard, in the policy's `paramDtype` (the trace's `bytes`, src/profile).
   */
  allGatherBytes: number;
  /** Bytes of the reduce-scatters issued: each one's input, in the policy's `reduceDtype`. */
  reduceScatterBytes: number;
  /** HSDP's all-reduces across the replicas (mesh dim 0) issued; 0 without replicas. */
  allReduces: number;
  /** Bytes of those all-reduces: each one's tensor, a reduced shard in `reduceDtype`. */
  allReduceBytes: number;
}

/** What the groups count during a step: the statistics but the root's own backward time. */
export type CommCounter = Exclude<keyof FSDPStats, "backwardMs">;

/**
 * How one parameter is cut on dim 0 across `size` ranks: every rank owns `shardRows` rows
 * (the last ones padded, possibly all padding), of which the first `localRows` are real.
 */
export interface ShardLayout {
  /** Rows of the full parameter (1 for a 0-d parameter). */
  rows: number;
  /** Elements per row. */
  rowNumel: number;
  /** Rows each rank stores, padding included: ceil(rows / size). */
  shardRows: number;
  /** Real rows on rank `rank`. */
  localRows: number;
  /** The first of them, as a row of the full parameter. */
  rowStart: number;
}

/** The layout of a parameter of `shape` on rank `rank` of `size`. */
export function shardLayout(shape: readonly number[], rank: number, size: number): ShardLayout {
  const rows = shape.length === 0 ? 1 : shape[0];
  const rowNumel = shape.slice(1).reduce((a, b) => a * b, 1);
  const shardRows = Math.ceil(rows / size);
  const localRows = realRows(rows, shardRows, rank);
  return { rows, rowNumel, shardRows, localRows, rowStart: Math.min(rows, rank * shardRows) };
}

/** Real (unpadded) rows in rank `rank`'s chunk of `shardRows` rows out of `rows`. */
export function realRows(rows: number, shardRows: number, rank: number): number {
  return Math.max(0, Math.min(shardRows, rows - rank * shardRows));
}
