/**
 * The whole tensor behind a tensor-parallel shard: every rank's shard gathered over the TP group
 * and put back in the full tensor's order (a fused q|k|v's parts interleaved back: rank r holds
 * part r of each chunk). What `fullStateDict` runs for each sharded parameter.
 * @module
 */

import { noGrad } from "../../tensor/autograd.ts";
import { cat } from "../../tensor/ops/indexing.ts";
import type { Tensor } from "../../tensor/tensor.ts";
import { gatherStacked } from "./_comm.ts";
import type { ParamPlacement, Shard } from "./placement.ts";

/**
 * The whole tensor of which `local` is this rank's shard, placed as `placed` says (a `Shard`): a
 * new tensor of `placed.fullShape`. Every rank of the TP group calls it, in the same order.
 *
 * @param name The tensor's name, for the error.
 * @param local This rank's whole TP shard (under FSDP: already gathered over the FSDP group).
 * @param placed Its placement.
 * @throws Error naming the tensor when the gathered shape is not the recorded full shape.
 */
export function gatherWhole(
  name: string,
  local: Tensor,
  placed: ParamPlacement & { placement: Shard },
): Tensor {
  const { group, chunks, fullShape } = placed;
  const dim = placed.placement.dim < 0 ? placed.placement.dim + local.ndim : placed.placement.dim;
  const whole = noGrad(() => {
    const stacked = gatherStacked(group, local);
    const part = local.shape[dim] / chunks;
    const pieces: Tensor[] = [];
    for (let c = 0; c < chunks; c++) {
      for (let r = 0; r < group.size; r++) {
        pieces.push(stacked.select(0, r).narrow(dim, c * part, part));
      }
    }
    const out = cat(pieces, dim);
    stacked.dispose();
    return out;
  });
  if (whole.shape.join() !== fullShape.join()) {
    const got = whole.shape;
    whole.dispose();
    throw new Error(
      `fullStateDict: ${name} gathered over the tensor-parallel group to [${got}], not its full ` +
        `[${fullShape}]`,
    );
  }
  return whole;
}
