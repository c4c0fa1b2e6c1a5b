/**
 * `fullStateDict`: the whole state dict of a fully sharded module, gathered on every rank.
 * @module
 */

import type { Module, StateDict } from "../../nn/module.ts";
import { copyInto, Tensor } from "../../tensor/tensor.ts";
import { realRows } from "./_common.ts";
import { copyElements } from "./_param.ts";
import type { FSDPParamGroup } from "./_param_group.ts";
import { fsdpStateOf } from "./fully_shard.ts";

/**
 * Gathers every parameter of the FSDP tree rooted at `model` and returns the module's state dict
 * with its own names (nanoGPT's for `nn.GPT`) and full shapes, as new tensors, on every rank.
 * Every rank must call it at the same point (it runs one all-gather per group). The parameters are
 * the f32 shards the optimizer trains, whatever the mixed-precision policy gathers for compute.
 *
 * @param model The root `fullyShard` returned.
 * @returns Names to full tensors: parameters gathered, buffers copied.
 *
 * @example The full weights of a sharded MLP
 * ```ts
 * import assert from "node:assert/strict";
 * import { dist, nn, parallel } from "../../../mod.ts";
 * await dist.initProcessGroup({ initMethod: "tcp://127.0.0.1:0", rank: 0, worldSize: 1 });
 * const model = parallel.fullyShard(new nn.MLP([4, 3, 2]));
 * const state = await parallel.fullStateDict(model);
 * assert.deepEqual(state["0.weight"].shape, [3, 4]);
 * assert.deepEqual(Object.keys(state), ["0.weight", "0.bias", "2.weight", "2.bias"]);
 * await dist.destroyProcessGroup();
 * ```
 */
export async function fullStateDict(model: Module): Promise<StateDict> {
  const state = fsdpStateOf(model);
  if (state === undefined || state.root !== state) {
    throw new Error(
      `fullStateDict: expected the root of a fullyShard tree, got a ${model.constructor.name} ` +
        (state === undefined ? "that is not fully sharded" : "inside another fully sharded module"),
    );
  }
  const full = new Map<Tensor, Tensor>();
  for (const group of state.groups) {
    for (const [p, copy] of await gatherShards(group)) {
      full.set(p.sharded, copy);
      full.set(p.unsharded, copy);
    }
  }
  return Object.fromEntries(
    Object.entries(model.stateDict()).map(([name, t]) => [name, full.get(t) ?? cloneOf(t)]),
  );
}

/** Every parameter of `group`, whole, from an all-gather of the f32 shards into new tensors. */
async function gatherShards(group: FSDPParamGroup) {
  const { size } = group.group;
  const S = group.S;
  const out = Tensor.empty([size * S], "f32", false, group.flat.device);
  try {
    if (S > 0) await group.group.allGather(out, group.flat);
    return group.params.map((p) => {
      const whole = Tensor.empty(p.shape, "f32", false, group.flat.device);
      const { rows, rowNumel, shardRows } = p.layout;
      for (let r = 0; r < size; r++) {
        const count = realRows(rows, shardRows, r) * rowNumel;
        copyElements(whole, r * shardRows * rowNumel, out, r * S + p.offset, count);
      }
      return [p, whole] as const;
    });
  } finally {
    out.dispose();
  }
}

function cloneOf(t: Tensor): Tensor {
  const out = Tensor.empty(t.shape, t.dtype, false, t.device);
  copyInto(out, t);
  return out;
}
