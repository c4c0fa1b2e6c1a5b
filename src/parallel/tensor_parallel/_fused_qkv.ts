/**
 * The check that a plan leaves GPT's attention a layout it can read: `attn.c_attn` is q|k|v fused
 * in one Linear, and the attention splits whatever each rank's output holds into three equal
 * parts of whole heads. A plain column split hands rank 0 all of q and part of k, which the
 * attention would split into three and train on, silently: refused at `parallelizeModule`.
 * @module
 */

import { CausalSelfAttention } from "../../nn/gpt_blocks.ts";
import type { Module } from "../../nn/module.ts";
import { linearOutputs } from "./_params.ts";
import { Replicate, Shard, shardRanges, tensorParallelPlacement } from "./placement.ts";

/**
 * Throws, naming the module and the fix, unless every `CausalSelfAttention` under `root` gets
 * from its `c_attn` either the whole q|k|v (not sharded, or a Replicate output) or, on each rank,
 * the q, k and v of the same whole heads in that order (`ColwiseParallel({ chunks: 3 })` with nHead
 * divisible by the tensor-parallel size).
 */
export function refuseSplitFusedQKV(root: Module): void {
  for (const [fqn, m] of root.namedModules()) {
    if (!(m instanceof CausalSelfAttention)) continue;
    const name = fqn ? `${fqn}.c_attn` : "c_attn";
    const output = linearOutputs.get(m.c_attn);
    if (output === undefined || output instanceof Replicate) continue;
    const placed = tensorParallelPlacement(m.c_attn.weight);
    const fix = "use ColwiseParallel({ chunks: 3 }) (each rank holds its heads' q, k and v)";
    // A weight [3C, C] split on its rows (dim 0, or -2) is a column-parallel one.
    if (!(placed?.placement instanceof Shard) || ![0, -2].includes(placed.placement.dim)) {
      throw new Error(
        `parallelizeModule: ${name} is GPT's fused q|k|v projection; its output is ${output} on ` +
          "each rank, but the attention reads every position's whole q, k and v from it; " + fix,
      );
    }
    const { chunks, fullShape, group } = placed;
    const width = fullShape[0] / 3, perRank = width / group.size, headSize = m.headSize;
    if (chunks !== 3) {
      throw new Error(
        `parallelizeModule: ${name} is GPT's fused q|k|v projection [${fullShape}]; ` +
          `ColwiseParallel(${chunks === 1 ? "" : `{ chunks: ${chunks} }`}) gives rank 0 ` +
          `${heldByRank0(fullShape[0], chunks, group.size)}, which the attention would split ` +
          `into q, k and v as if each were ${perRank} features of the same heads; ${fix}`,
      );
    }
    if (perRank % headSize !== 0) {
      throw new Error(
        `parallelizeModule: ${name} splits each of q, k and v (${width} features, heads of ` +
          `${headSize}) into ${group.size} parts of ${perRank}, not whole heads: nHead ` +
          `${width / headSize} must be divisible by the tensor-parallel size ${group.size}`,
      );
    }
  }
}

/** What of q, k and v rank 0 holds when `length` rows are split in `chunks` parts each cut in `size`. */
function heldByRank0(length: number, chunks: number, size: number): string {
  const width = length / 3;
  const held = ["q", "k", "v"].map((part, i) => {
    const from = i * width, to = from + width;
    const rows = shardRanges(length, chunks, 0, size).reduce(
      (n, r) => n + Math.max(0, Math.min(to, r.start + r.length) - Math.max(from, r.start)),
      0,
    );
    return rows === width
      ? `all of ${part}`
      : rows === 0
      ? ""
      : `${rows} of ${part}'s ${width} features`;
  });
  return held.filter((h) => h !== "").join(" and ");
}
