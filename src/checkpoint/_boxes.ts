/**
 * Boxes: which N-D block of a full tensor each part of a rank's local tensor holds, under any
 * composition of tensor parallelism (a `Shard(dim)` split, in `chunks` fused parts) and FSDP (a
 * dim-0 row range of whatever the rank holds before it), and the copy of one box's overlap with
 * another.
 *
 * [Note: boxes]
 * A box is `start` and `length` per dimension of the full tensor. A rank's local tensor is a
 * stack of boxes: box `i` sits at `at` in local coordinates. A plain tensor is one box (the
 * whole); a TP `Shard(1)` is a column box; a TP `Shard(0)` of a fused q|k|v (`chunks` 3) is three
 * row boxes, one per chunk, concatenated along dim 0; FSDP then keeps rows
 * `rowStart .. rowStart + rows - 1` of that concatenation, which cuts the boxes it crosses. A 0-d
 * tensor is treated as shape [1] (its one box is start [0], length [1]), as FSDP does.
 * @module
 */

import { localShard } from "../parallel/fsdp/fully_shard.ts";
import {
  Shard,
  shardRanges,
  tensorParallelPlacement,
} from "../parallel/tensor_parallel/placement.ts";
import { noGrad } from "../tensor/autograd.ts";
import { tidy } from "../tensor/scope.ts";
import type { Tensor } from "../tensor/tensor.ts";
import { type Box, boxShape, type LocalBox, wholeBox } from "./_box_geometry.ts";

export { type Box, boxShape, intersect, type LocalBox, volume, wholeBox } from "./_box_geometry.ts";

/** What a rank holds of one full tensor. */
export interface Holding {
  /** The full tensor's shape ([] for a 0-d one). */
  shape: number[];
  /** The local tensor's shape, 0-d promoted to [1]. */
  localShape: number[];
  /** Its boxes (none when it holds nothing, an FSDP rank past the last row). */
  boxes: LocalBox[];
}

/**
 * What this rank holds of the full tensor behind `param`: its TP placement (if any), then its
 * FSDP rows (if any), as boxes (see [Note: boxes]).
 *
 * @param param A parameter of the model, as the model holds it (a TP and/or FSDP shard, or whole).
 */
export function holding(param: Tensor): Holding {
  const tp = tensorParallelPlacement(param);
  const fsdp = localShard(param);
  // fsdp.shape is what FSDP sharded: the TP-local tensor under TP (or the whole one without).
  const beforeFsdp = boxShape(fsdp.shape);
  const shape = [...(tp?.fullShape ?? fsdp.shape)];
  const full = boxShape(shape);
  let boxes: LocalBox[];
  if (tp !== undefined && tp.placement instanceof Shard) {
    const d = tp.placement.dim < 0 ? tp.placement.dim + full.length : tp.placement.dim;
    let at = 0;
    boxes = shardRanges(full[d], tp.chunks, tp.group.rank, tp.group.size).map((r) => {
      const box = { start: full.map(() => 0), length: [...full], at: full.map(() => 0) };
      box.start[d] = r.start;
      box.length[d] = r.length;
      box.at[d] = at;
      at += r.length;
      return box;
    });
  } else {
    boxes = [wholeBox(shape)];
  }
  if (!fsdp.sharded) return { shape, localShape: beforeFsdp, boxes };
  // FSDP keeps local rows [from, to) of the TP-local tensor: cut each box to them on dim 0.
  const from = fsdp.rowStart, to = fsdp.rowStart + fsdp.rows;
  const cut: LocalBox[] = [];
  for (const b of boxes) {
    const lo = Math.max(from, b.at[0]), hi = Math.min(to, b.at[0] + b.length[0]);
    if (lo >= hi) continue;
    cut.push({
      start: [b.start[0] + lo - b.at[0], ...b.start.slice(1)],
      length: [hi - lo, ...b.length.slice(1)],
      at: [lo - from, ...b.at.slice(1)],
    });
  }
  return { shape, localShape: [fsdp.rows, ...beforeFsdp.slice(1)], boxes: cut };
}

/** `t` narrowed to `length` elements from `from` on every dimension (a view). */
function block(t: Tensor, from: readonly number[], length: readonly number[]): Tensor {
  let v = t;
  for (let d = 0; d < from.length; d++) v = v.narrow(d, from[d], length[d]);
  return v;
}

/**
 * Copies the overlap `part` (full-tensor coordinates) from `src`, a tensor holding box `srcBox`
 * (shaped as it), into `dst`, whose box `dstBox` sits at `dstBox.at`.
 */
export function copyPart(
  dst: Tensor,
  dstBox: LocalBox,
  src: Tensor,
  srcBox: Box,
  part: Box,
): void {
  tidy(() =>
    noGrad(() => {
      const into = part.start.map((s, d) => s - dstBox.start[d] + dstBox.at[d]);
      const out = part.start.map((s, d) => s - srcBox.start[d]);
      copyBlock(block(dst, into, part.length), block(src, out, part.length), 0);
    })
  );
}

/**
 * `dst.copy_(src)` for a block that may not be contiguous (a column box of a row-major tensor):
 * copy_ needs a contiguous destination, so the block is cut along its leading dimensions until
 * each piece is (a row segment at the latest: size-1 dimensions do not break contiguity).
 */
function copyBlock(dst: Tensor, src: Tensor, dim: number): void {
  if (dst.isContiguous() || dim >= dst.ndim) {
    dst.copy_(src);
    return;
  }
  for (let i = 0; i < dst.shape[dim]; i++) {
    copyBlock(dst.narrow(dim, i, 1), src.narrow(dim, i, 1), dim + 1);
  }
}

/** The part of `t` (shaped as `localShape`) holding `box`, copied out contiguous. */
export function extract(t: Tensor, localShape: readonly number[], box: LocalBox): Tensor {
  return tidy(() => noGrad(() => block(t.view([...localShape]), box.at, box.length).contiguous()));
}
