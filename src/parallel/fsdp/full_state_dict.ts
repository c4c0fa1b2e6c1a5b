/**
 * `fullStateDict`: the whole state dict of a parallel module (FSDP, HSDP, tensor parallelism and
 * their compositions), gathered over every mesh dimension that shards a parameter, on every rank.
 * @module
 */

import type { Module, StateDict } from "../../nn/module.ts";
import { copyInto, Tensor } from "../../tensor/tensor.ts";
import { gatherWhole } from "../tensor_parallel/_gather_whole.ts";
import { Shard, tensorParallelPlacement } from "../tensor_parallel/placement.ts";
import { realRows } from "./_common.ts";
import { copyElements } from "./_param.ts";
import type { FSDPParamGroup } from "./_param_group.ts";
import { fsdpStateOf, localShard } from "./fully_shard.ts";

/**
 * Gathers every parameter of `model` whole and returns the module's state dict with its own names
 * (nanoGPT's for `nn.GPT`) and full shapes, as new tensors, on every rank (PyTorch's
 * `get_model_state_dict(model, options=StateDictOptions(full_state_dict=True))`): FSDP's rows
 * over the shard group (HSDP's replicas hold the same rows), then tensor parallelism's shards over
 * the TP group (fused q|k|v parts put back in order), so that a TP × FSDP or HSDP × TP model gives
 * the same tensors as one process. Every rank must call it at the same point (it runs one
 * all-gather per FSDP group, then one per TP-sharded tensor). The parameters are the f32 shards
 * the optimizer trains, whatever the mixed-precision policy gathers for compute. A module with
 * neither gives copies of its tensors. A pipeline stage's module gives its stage's tensors, whole
 * (the whole model is the union of the stages': the train job reads it back from its sharded
 * snapshot).
 *
 * @param model The module: a `fullyShard` root, a module made tensor-parallel by
 *   `parallelizeModule` (and then fully sharded), or any module.
 * @returns Names to full tensors: parameters gathered, buffers copied.
 * @throws Error for a module inside a `fullyShard` tree that is not its root, or a parameter
 *   sharded by a `fullyShard` root outside `model` (naming the parameter and the FSDP dimension):
 *   call it on that root.
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
  const own = fsdpStateOf(model);
  if (own !== undefined && own.root !== own) {
    throw new Error(
      `fullStateDict: this ${model.constructor.name} is inside another fully sharded module, ` +
        "whose groups hold parameters it lacks; call fullStateDict on the root fullyShard returned",
    );
  }
  // FSDP first: each parameter's TP-local tensor, whole over its FSDP group.
  const overFsdp = new Map<Tensor, Tensor>();
  for (const m of model.modules()) {
    const state = fsdpStateOf(m);
    if (state === undefined || state.root !== state) continue;
    for (const group of state.groups) {
      for (const [p, copy] of await gatherShards(group)) {
        overFsdp.set(p.sharded, copy);
        overFsdp.set(p.unsharded, copy);
      }
    }
  }
  // Then TP, in the state dict's order (the same on every rank of a TP group); a tied
  // parameter's tensor is gathered once.
  const whole = new Map<Tensor, Tensor>();
  const out: StateDict = {};
  for (const [name, t] of Object.entries(model.stateDict())) {
    let full = whole.get(t);
    if (full === undefined) {
      full = wholeOf(model, name, t, overFsdp.get(t));
      whole.set(t, full);
    }
    out[name] = full;
  }
  const kept = new Set(Object.values(out));
  for (const copy of new Set(overFsdp.values())) if (!kept.has(copy)) copy.dispose();
  return out;
}

/**
 * `t` (named `name` in `model`) whole: `gathered`, its FSDP rows gathered (if FSDP shards it),
 * then gathered over its TP group (if TP shards it); a copy of `t` when nothing shards it.
 */
function wholeOf(model: Module, name: string, t: Tensor, gathered: Tensor | undefined): Tensor {
  const fsdp = localShard(t);
  if (fsdp.sharded && gathered === undefined) {
    throw new Error(
      `fullStateDict: ${name} is sharded by FSDP (this rank holds rows ${fsdp.rowStart}..` +
        `${fsdp.rowStart + fsdp.rows - 1} of [${fsdp.shape}]) under a fullyShard root outside ` +
        `this ${model.constructor.name}, so its FSDP dimension cannot be gathered here; call ` +
        "fullStateDict on that root",
    );
  }
  const tp = tensorParallelPlacement(t);
  if (tp !== undefined && tp.placement instanceof Shard) {
    return gatherWhole(name, gathered ?? t, { ...tp, placement: tp.placement });
  }
  return gathered ?? cloneOf(t);
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
