/**
 * The options and statistics of `DistributedDataParallel` (ddp.ts).
 * @module
 */

import type { ProcessGroup } from "../distributed/mod.ts";
import type { MixedPrecisionPolicy } from "./mixed_precision.ts";

/** Options of {@linkcode DistributedDataParallel}. */
export interface DDPOptions {
  /** Bucket size cap in MiB after the first bucket (default 25). */
  bucketCapMb?: number;
  /** Cap of the first bucket, which is issued earliest (default 1). */
  firstBucketMb?: number;
  /**
   * Allow parameters that get no gradient in a step: their gradient counts as zero in the average,
   * and one that no rank used keeps `.grad` null. Costs one tiny all-reduce per step.
   */
  findUnusedParameters?: boolean;
  /** Broadcast rank 0's buffers after every synchronised backward (default true). */
  broadcastBuffers?: boolean;
  /** The process group (default: the world). */
  processGroup?: ProcessGroup;
  /**
   * Mixed precision (see [Note: mixed precision] in mixed_precision.ts): `paramDtype` runs the
   * forward on copies of the f32 parameters in that dtype, `reduceDtype` "bf16" or "f16" reduces
   * the buckets as PyTorch's `bf16_compress_hook` (default "f32").
   */
  mixedPrecision?: MixedPrecisionPolicy;
}

/** Timings of the last synchronised backward, to see how much communication was hidden. */
export interface DDPStats {
  /** Milliseconds inside `loss.backward()`. */
  backwardMs: number;
  /** Milliseconds waiting for all-reduces after backward returned (communication not hidden). */
  exposedCommMs: number;
  /** Milliseconds from the first bucket's issue to the last bucket's completion. */
  commSpanMs: number;
  /** Buckets reduced. */
  buckets: number;
  /** Bytes of the bucket all-reduces (in the policy's `reduceDtype`; the trace's `bytes`). */
  allReduceBytes: number;
}
