/**
 * The copies around FSDP's two collectives (FSDP2's `_fsdp_collectives.py`).
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

import { noGrad } from "../../tensor/autograd.ts";
import { contiguousStrides, Tensor } from "../../tensor/tensor.ts";
import { realRows } from "./_common.ts";
import { addElements, copyElements, type FSDPParam } from "./_param.ts";

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
