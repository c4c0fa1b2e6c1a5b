/**
 * FSDP's two collectives, how they are issued and the copies around them (FSDP2's
 * `_fsdp_collectives.py`): the parameter group decides when it gathers and reduces (see
 * [Note: FSDP hooks] in _param_group.ts), this file how.
 *
 * [Note: flat layouts]
 * A group's shards live in one flat buffer of S elements per rank: each parameter's padded shard
 * (shardRows × rowNumel) at its offset. So the all-gather input is that buffer as it stands (no
 * copy-in) and the output is size × S elements, rank-major: rank r's piece of parameter p is at
 * r·S + p.offset. Copy-out moves the real rows of each piece into the full parameter. The
 * reduce-scatter input has the same layout: copy-in adds each full gradient's rank-r rows at
 * r·S + p.offset (padding stays zero), and rank r receives its S elements, the shards' gradients.
 * @module
 */

import type { ProcessGroup, Work } from "../../distributed/mod.ts";
import { noGrad } from "../../tensor/autograd.ts";
import { itemSize } from "../../tensor/dtype.ts";
import { contiguousStrides, Tensor } from "../../tensor/tensor.ts";
import { gradientDivideFactors, type PrecisionDtype } from "../mixed_precision.ts";
import { type CommCounter, realRows } from "./_common.ts";
import { addElements, copyElements, type FSDPParam } from "./_param.ts";
import { allReduceAfter } from "./_replicate.ts";

/** Adds `n` to a step's counter (the root's `StepRecorder.count`). */
export type Count = (what: CommCounter, n: number) => void;

/**
 * Issues the all-gather of this rank's shards `flat` (S elements) with `issue`, the process
 * group's blocking, started or awaited all-gather, into a new buffer of size × S elements in
 * `paramDtype` (see [Note: flat layouts]). A cast input is freed once issued (the collective holds
 * its memory until it ends); the buffer is freed if the issue throws.
 *
 * @returns The buffer and what `issue` returned, or null for an empty group (nothing to send).
 */
export function allGatherShards<W>(
  flat: Tensor,
  group: ProcessGroup,
  paramDtype: PrecisionDtype,
  count: Count,
  issue: (out: Tensor, input: Tensor) => W,
): { out: Tensor; work: W } | null {
  const S = flat.numel();
  if (S === 0) return null;
  count("allGathers", 1);
  count("allGatherBytes", group.size * S * itemSize(paramDtype));
  const out = Tensor.empty([group.size * S], paramDtype, false, flat.device);
  const input = paramDtype === "f32" ? flat : noGrad(() => flat.to(paramDtype));
  try {
    return { out, work: issue(out, input) };
  } catch (err) {
    out.dispose();
    throw err;
  } finally {
    if (input !== flat) input.dispose();
  }
}

/** Copies the gathered pieces (`out`, size × S) into each parameter's full parameter. */
export function copyOut(out: Tensor, params: readonly FSDPParam[], size: number, S: number): void {
  for (const p of params) {
    p.allocUnsharded();
    const { rows, rowNumel, shardRows } = p.layout;
    for (let r = 0; r < size; r++) {
      const count = realRows(rows, shardRows, r) * rowNumel;
      copyElements(p.unsharded, r * shardRows * rowNumel, out, r * S + p.offset, count);
    }
  }
}

/**
 * Adds each full parameter's gradient into `input` (size × S f32, see [Note: flat layouts]) and
 * drops the gradient; a parameter without one adds nothing (a zero gradient). A bf16 or f16
 * gradient is widened to f32 first (exactly).
 */
export function copyIn(
  input: Tensor,
  params: readonly FSDPParam[],
  size: number,
  S: number,
): void {
  for (const p of params) {
    const grad = p.unsharded.grad;
    p.unsharded.grad = null;
    if (grad === null || grad.disposed) continue;
    const g = grad.dtype !== "f32"
      ? noGrad(() => grad.to("f32"))
      : grad.isContiguous()
      ? grad
      : grad.detach().contiguous();
    const { rows, rowNumel, shardRows } = p.layout;
    for (let r = 0; r < size; r++) {
      const count = realRows(rows, shardRows, r) * rowNumel;
      addElements(input, r * S + p.offset, g, r * shardRows * rowNumel, count);
    }
    if (g !== grad) g.dispose();
    grad.dispose();
  }
}

/**
 * Makes this rank's reduced gradients (`out`, S elements) the shards' `.grad`: a view of `out`
 * where the shard has none, added in where it has one (accumulation across steps).
 */
export function takeReduced(out: Tensor, params: readonly FSDPParam[]): void {
  for (const p of params) {
    if (!p.sharded.requiresGrad) continue;
    const shape = p.sharded.shape;
    const view = new Tensor(out.storage, shape, "f32", contiguousStrides(shape), p.offset);
    view.persistent = true;
    const grad = p.sharded.grad;
    if (grad === null || grad.disposed) {
      p.sharded.grad = view;
    } else {
      noGrad(() => grad.add_(view));
      view.dispose();
    }
  }
}

/** A reduction in flight, and what its output is divided by once it ends (f16's post factor). */
export interface Reduction {
  /** This rank's reduced gradients, S elements in the reduce dtype. */
  out: Tensor;
  /** The reduce-scatter, followed under HSDP by the all-reduce across the replicas. */
  work: Work;
  /** The divisor applied after the reduction. */
  post: number;
}

/**
 * Issues the reduction of a group's summed full gradients `pending` (size × S f32, see
 * [Note: flat layouts]; consumed): divided ahead as `reduceDtype` needs, cast to it,
 * reduce-scattered over `group`, then all-reduced across `replicate`, HSDP's replicas (see
 * [Note: replicate all-reduce order] in _replicate.ts), so the gradients are averaged over every
 * data-parallel rank: the shards' and the replicas'.
 */
export function reduceGradients(
  pending: Tensor,
  group: ProcessGroup,
  replicate: ProcessGroup | null,
  reduceDtype: PrecisionDtype,
  count: Count,
): Reduction {
  const size = group.size, S = pending.numel() / size;
  const replicas = replicate?.size ?? 1;
  const { pre, op, post } = gradientDivideFactors(size * replicas, reduceDtype);
  // "avg" divides by each group's own size, so the two averages make the mean over both.
  const opOver = (n: number) => (n === 1 ? "sum" : op);
  const input = noGrad(() => {
    if (pre !== 1) pending.div_(pre);
    return pending.to(reduceDtype);
  });
  const out = Tensor.empty([S], reduceDtype, false, pending.device);
  out.persistent = true;
  // The collective holds the input's memory until it ends.
  let work = group.reduceScatter(out, input, opOver(size));
  count("reduceScatters", 1);
  count("reduceScatterBytes", input.numel() * itemSize(reduceDtype));
  if (replicate !== null && replicas > 1) {
    work = allReduceAfter(replicate, work, out, opOver(replicas));
    count("allReduces", 1);
    count("allReduceBytes", S * itemSize(reduceDtype));
  }
  if (input !== pending) input.dispose();
  pending.dispose();
  return { out, work, post };
}

/**
 * Waits for `reduction` and makes its output, widened to f32 and divided by its post factor, the
 * shards' gradients (see {@linkcode takeReduced}).
 */
export async function takeReduction(
  reduction: Reduction,
  params: readonly FSDPParam[],
): Promise<void> {
  let reduced: Tensor | null = null;
  try {
    await reduction.work;
    reduced = noGrad(() => {
      const wide = reduction.out.to("f32");
      return reduction.post === 1 ? wide : wide.div_(reduction.post);
    });
    reduced.persistent = true;
    takeReduced(reduced, params);
  } finally {
    if (reduced !== reduction.out) reduced?.dispose();
    reduction.out.dispose();
  }
}
