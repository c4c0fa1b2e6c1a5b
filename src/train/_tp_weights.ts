/** The whole state dict of a tensor-parallel model, gathered over its TP group. @module */

import type { Module, StateDict } from "../nn/module.ts";
import { noGrad } from "../tensor/autograd.ts";
import { cat } from "../tensor/ops/indexing.ts";
import type { Tensor } from "../tensor/tensor.ts";
import { gatherStacked } from "../parallel/tensor_parallel/_comm.ts";
import { Shard, tensorParallelPlacement } from "../parallel/tensor_parallel/placement.ts";

/**
 * `model`'s state dict with every tensor-parallel shard gathered whole (in the full shape, fused
 * q|k|v parts put back in order); replicated tensors as they are. Every rank of the TP group calls
 * it, in the same order (the state dict's).
 *
 * @param local The TP-local tensors by name, when they are not the model's own: under TP × FSDP,
 *   `fullStateDict`'s (each rank's TP shard, gathered whole over the data-parallel group), whose
 *   placement is still the model parameter's of the same name.
 */
export function gatherTensorParallel(model: Module, local?: StateDict): StateDict {
  const whole: StateDict = {};
  const done = new Map<Tensor, Tensor>(); // tied parameters are gathered once
  for (const [name, param] of Object.entries(model.stateDict())) {
    const t = local?.[name] ?? param;
    const placed = tensorParallelPlacement(param);
    if (placed === undefined || !(placed.placement instanceof Shard)) {
      whole[name] = t;
      continue;
    }
    let full = done.get(t);
    if (full === undefined) {
      const { group, chunks, fullShape } = placed;
      const dim = placed.placement.dim < 0 ? placed.placement.dim + t.ndim : placed.placement.dim;
      full = noGrad(() => {
        const stacked = gatherStacked(group, t);
        const part = t.shape[dim] / chunks;
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
      if (full.shape.join() !== fullShape.join()) {
        throw new Error(
          `gatherTensorParallel: ${name} gathered to [${full.shape}], not [${fullShape}]`,
        );
      }
      done.set(t, full);
    }
    whole[name] = full;
  }
  return whole;
}
