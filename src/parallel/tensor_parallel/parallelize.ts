/**
 * `parallelizeModule` (PyTorch's `torch.distributed.tensor.parallel.parallelize_module`): applies
 * parallel styles to a module or to its submodules by fully qualified name.
 * @module
 */

import type { DeviceMesh } from "../../distributed/device_mesh.ts";
import type { Module } from "../../nn/module.ts";
import { Parameter } from "../../nn/parameter.ts";
import { refuseSplitFusedQKV } from "./_fused_qkv.ts";
import { styled } from "./_params.ts";
import { tensorParallelPlacement } from "./placement.ts";
import { Shard } from "./placement.ts";
import { ParallelStyle } from "./style.ts";

/**
 * One style for the module itself, or styles by fully qualified submodule name, where `*` stands
 * for one name component (`"transformer.h.*.attn.c_attn"`).
 */
export type ParallelizePlan = ParallelStyle | Record<string, ParallelStyle>;

/**
 * Parallelizes `module` across `tpMesh` in place, as PyTorch's `parallelize_module`: each style
 * of `plan` shards its module's parameters (this rank keeps its part: the others' memory is
 * freed) and wraps its forward. Every rank calls it with equal modules (the same initialisation)
 * and the same plan; the module's `parameters()` are then this rank's shards and the ones left
 * whole, which an optimizer and `clipGradNorm` take as they are (the norm counts each shard once).
 *
 * @param module The module, changed in place.
 * @param tpMesh The 1-D mesh of the tensor-parallel ranks (a 1-D `DeviceMesh`, or the "tp"
 *   dimension of a larger one: `mesh.get("tp")`).
 * @param plan A style, or styles by submodule name.
 * @returns `module`.
 * @throws DistError for a mesh of more than one dimension.
 * @throws Error for a plan name that matches no submodule, a style on a module type it does not
 *   support, a parameter whose size the mesh does not divide, a parameter sharded for one
 *   module and read unchanged by another (a tied parameter whose other user has no style), or
 *   a GPT attention's fused q|k|v projection (`attn.c_attn`) split in a way the attention cannot
 *   read: it needs `ColwiseParallel({ chunks: 3 })` (each rank holds its whole heads' q, k and v),
 *   or to stay whole.
 *
 * @example Two Linears, column- then row-wise, on a mesh of one rank
 * ```ts
 * import assert from "node:assert/strict";
 * import { dist, nn, parallel, randn } from "../../../mod.ts";
 * await dist.initProcessGroup({ initMethod: "tcp://127.0.0.1:0", rank: 0, worldSize: 1 });
 * const mesh = await dist.initDeviceMesh("cpu", [1], { meshDimNames: ["tp"] });
 * const mlp = new nn.Sequential(new nn.Linear(4, 8), new nn.GELU(), new nn.Linear(8, 4));
 * parallel.parallelizeModule(mlp, mesh, {
 *   "0": new parallel.ColwiseParallel(),
 *   "2": new parallel.RowwiseParallel(),
 * });
 * assert.deepEqual(mlp.forward(randn([2, 4])).shape, [2, 4]);
 * await dist.destroyProcessGroup();
 * ```
 */
export function parallelizeModule<M extends Module>(
  module: M,
  tpMesh: DeviceMesh,
  plan: ParallelizePlan,
): M {
  const group = tpMesh.getGroup();
  if (group.rank < 0) throw new Error("parallelizeModule: this process is not in the mesh's group");
  const entries: [string, ParallelStyle][] = plan instanceof ParallelStyle
    ? [["", plan]]
    : Object.entries(plan);
  const modules = [...module.namedModules()];
  for (const [pattern, style] of entries) {
    if (!(style instanceof ParallelStyle)) {
      throw new TypeError(
        `parallelizeModule: the plan's "${pattern}" is not a ParallelStyle (ColwiseParallel, ` +
          "RowwiseParallel, SequenceParallel, PrepareModuleInput, PrepareModuleOutput)",
      );
    }
    const matcher = nameMatcher(pattern);
    const matched = modules.filter(([name]) => matcher(name));
    if (matched.length === 0) {
      throw new Error(
        `parallelizeModule: "${pattern}" names no submodule of the ${module.constructor.name}`,
      );
    }
    for (const [fqn, m] of matched) style.apply({ module: m, fqn, root: module, group });
  }
  refuseUnstyledShards(module);
  refuseSplitFusedQKV(module);
  return module;
}

/** A test of dotted names against `pattern`, `*` standing for one component. */
function nameMatcher(pattern: string): (name: string) => boolean {
  if (pattern === "") return (name) => name === "";
  const parts = pattern.split(".");
  return (name) => {
    const got = name === "" ? [] : name.split(".");
    return got.length === parts.length && parts.every((p, i) => p === "*" || p === got[i]);
  };
}

/** A sharded parameter held by a module no style changed would be read as if whole. */
function refuseUnstyledShards(root: Module): void {
  for (const [fqn, m] of root.namedModules()) {
    if (styled.has(m)) continue;
    for (const [key, value] of Object.entries(m)) {
      if (!(value instanceof Parameter)) continue;
      const placed = tensorParallelPlacement(value);
      if (placed?.placement instanceof Shard) {
        throw new Error(
          `parallelizeModule: ${fqn ? `${fqn}.${key}` : key} is a shard (${placed.placement}) ` +
            `but ${fqn || "the root"} has no parallel style; a parameter tied to a sharded one ` +
            "needs a style on every module that holds it",
        );
      }
    }
  }
}
