/**
 * `fullyShard`: fully sharded data parallelism after PyTorch's FSDP2 (`fully_shard`). Each call
 * makes one parameter group of the module's parameters that no earlier call took, shards every
 * one on dim 0 across the process group (or a device mesh's shard dimension, with HSDP's
 * replicas across its other: see FullyShardOptions.mesh), and hooks the module's forward (see
 * [Note: FSDP hooks] in _param_group.ts). Call it on submodules first (each transformer block),
 * then on the root.
 *
 * [Note: 2-D parallelism]
 * Tensor parallelism within, FSDP across (torchtitan's order: `parallelizeModule` on the TP mesh,
 * then `fullyShard` on the data-parallel mesh): FSDP takes each TP-local shard as the parameter it
 * shards on dim 0 across the data-parallel group. The TP styles read their weights from the
 * module at call time, so they compute with the FSDP-gathered local TP shard; the TP placement
 * record is carried over to FSDP's shard and full parameter (`tensorParallelPlacement` answers
 * for both, and `localShard` tells the rows of the TP shard), and clipGradNorm sums a shard's
 * squares across the data-parallel group and then across the TP group when the TP placement
 * registered one (a TP-replicated parameter only across the data-parallel group).
 * @module
 */

import { DeviceMesh, type ProcessGroup, worldGroup } from "../../distributed/mod.ts";
import { callerScope } from "../../distributed/ledger.ts";
import { diagnosedOnFailure } from "../../distributed/_pending_diagnosis.ts";
import type { Module } from "../../nn/module.ts";
import { Parameter } from "../../nn/parameter.ts";
import { registerShardedGradient, shardedGradientGatherers } from "../../nn/utils/clip_grad.ts";
import { Tensor } from "../../tensor/tensor.ts";
import { castFloatInputs, type ResolvedPolicy, resolveMixedPrecision } from "../mixed_precision.ts";
import { type FSDPStats, type FullyShardOptions, shardLayout } from "./_common.ts";
import { FSDPParam, type ParamOwner } from "./_param.ts";
import { FSDPParamGroup } from "./_param_group.ts";
import { FSDPState } from "./_state.ts";
import { partialsGatherer } from "../_norm_partials.ts";
import { setParamPlacement, tensorParallelPlacement } from "../tensor_parallel/placement.ts";

/** What `fullyShard` adds to a module. */
export interface FSDPMethods {
  /**
   * Runs backward (gathering each group's parameters again when they were resharded) and, unless
   * inside `noSync`, waits until every group's gradients are averaged across ranks into the
   * shards' `.grad`. Call it on the root. `gradient` is the gradient of a non-scalar `loss` (a
   * pipeline stage's output), as in `backwardAsync`.
   */
  backward(loss: Tensor, gradient?: Tensor): Promise<void>;
  /** Runs `fn` with gradient reduction off: backward passes accumulate full local gradients. */
  noSync<R>(fn: () => R | Promise<R>): Promise<R>;
  /** Communication of the last synchronised step (on the root). */
  readonly lastStats: FSDPStats;
  /** The data-parallel size: the ranks sharded across, times the replicas under HSDP. */
  readonly worldSize: number;
}

/** A module changed in place by {@linkcode fullyShard}. */
export type FSDPModule<M extends Module = Module> = M & FSDPMethods;

/** The shards and full parameters already in some group, to skip in later calls. */
const managed = new WeakMap<Tensor, FSDPParam>();
const STATE = Symbol("fsdpState");

/**
 * Which rows of which full parameter `param` holds on this rank: a shard made by
 * {@linkcode fullyShard} holds rows `rowStart .. rowStart + rows - 1` of a parameter of `shape`;
 * any other parameter is whole (and the same on every rank). Under HSDP, the ranks along the
 * mesh's replicate dimension hold the same rows; `replicaRank` is this rank's place among them
 * (0 without replicas), so that only replica 0 of each shard saves it.
 *
 * @param param A parameter of a module, sharded or not.
 * @returns The full shape, the first row held, the number of rows, whether it is a shard, and
 * its replica rank.
 *
 * @example A parameter that is not sharded is whole
 * ```ts
 * import assert from "node:assert/strict";
 * import { nn, parallel } from "../../../mod.ts";
 * const layer = new nn.Linear(3, 2);
 * assert.deepEqual(parallel.localShard(layer.weight), {
 *   shape: [2, 3], rowStart: 0, rows: 2, sharded: false, replicaRank: 0,
 * });
 * ```
 */
export function localShard(
  param: Tensor,
): {
  shape: readonly number[];
  rowStart: number;
  rows: number;
  sharded: boolean;
  replicaRank: number;
} {
  const p = managed.get(param);
  if (p === undefined) {
    return {
      shape: param.shape,
      rowStart: 0,
      rows: param.shape.length === 0 ? 1 : param.shape[0],
      sharded: false,
      replicaRank: 0,
    };
  }
  const { rowStart, localRows: rows } = p.layout;
  return { shape: p.shape, rowStart, rows, sharded: true, replicaRank: p.replicaRank };
}

/**
 * The FSDP state of a module `fullyShard` changed, or undefined.
 * @ignore dtrain-internal (its module is re-exported with `export *`)
 */
export function fsdpStateOf(module: Module): FSDPState | undefined {
  return (module as unknown as { [STATE]?: FSDPState })[STATE];
}

/**
 * Shards `module`'s parameters across the process group (or the mesh: see
 * {@linkcode FullyShardOptions}'s `mesh` for HSDP), in place, and returns it typed as an
 * FSDP module. Every rank must call it with equal modules (the same initialisation: each rank
 * keeps its own rows of its own copy) and in the same order.
 *
 * @param module The module; its parameters not yet in a group become this call's group.
 * @param options See {@linkcode FullyShardOptions}.
 * @returns `module`, whose `parameters()` are now this rank's shards.
 *
 * @example One FSDP step
 * ```ts
 * import assert from "node:assert/strict";
 * import { dist, F, nn, optim, parallel, randn, tensor } from "../../../mod.ts";
 * await dist.initProcessGroup({ initMethod: "tcp://127.0.0.1:0", rank: 0, worldSize: 1 });
 * const model = parallel.fullyShard(new nn.MLP([8, 16, 3]));
 * const opt = new optim.AdamW(model.parameters(), { lr: 0.01 });
 * const x = randn([4, 8]), y = tensor([0, 1, 2, 0], [4], { dtype: "i32" });
 * const loss = F.crossEntropy(model.forward(x), y);
 * await model.backward(loss); // gradients reduce-scattered into the shards' .grad
 * assert.ok(model.parameters().every((p) => p.grad !== null));
 * opt.step();
 * await dist.destroyProcessGroup();
 * ```
 */
export function fullyShard<M extends Module>(
  module: M,
  options: FullyShardOptions = {},
): FSDPModule<M> {
  if (fsdpStateOf(module) !== undefined) {
    throw new Error(`fullyShard: this ${module.constructor.name} is already fully sharded`);
  }
  const policy = resolveMixedPrecision("fullyShard", options.mpPolicy, "mpPolicy");
  const groups = shardingGroups(options);
  const { group } = groups;
  if (group.rank < 0) throw new Error("fullyShard: this process is not a member of the group");
  const state = new FSDPState();
  state.group = makeGroup(module, groups, options, state, policy);
  for (const m of module.modules()) {
    const nested = fsdpStateOf(m);
    if (nested === undefined) continue;
    nested.root = state;
    nested.group!.root = state;
    state.groups.push(nested.group!);
  }
  state.groups.push(state.group);
  attach(module, state, group.size * (groups.replicate?.size ?? 1), policy);
  return module as FSDPModule<M>;
}

/** The groups to shard over and, under HSDP, to replicate across. */
interface ShardingGroups {
  group: ProcessGroup;
  replicate: ProcessGroup | null;
  mesh: DeviceMesh | null;
}

/** The groups `options` name: its group, its mesh's (1-D: shard; 2-D: replicate, shard). */
function shardingGroups(options: FullyShardOptions): ShardingGroups {
  const { group, mesh } = options;
  if (mesh === undefined) {
    return { group: group ?? worldGroup("fullyShard"), replicate: null, mesh: null };
  }
  if (group !== undefined) {
    throw new Error(
      "fullyShard: both group and mesh are given; give one (a 1-D mesh's group is " +
        "mesh.getGroup())",
    );
  }
  if (!(mesh instanceof DeviceMesh)) {
    throw new TypeError(
      `fullyShard: mesh must be a DeviceMesh (from dist.initDeviceMesh), got ${
        mesh === null ? "null" : typeof mesh === "object" ? (mesh as object).constructor.name : mesh
      }`,
    );
  }
  if (mesh.ndim === 1) return { group: mesh.getGroup(), replicate: null, mesh };
  if (mesh.ndim === 2) return { group: mesh.getGroup(1), replicate: mesh.getGroup(0), mesh };
  throw new Error(
    `fullyShard: mesh ${mesh} has ${mesh.ndim} dimensions; FSDP shards over a 1-D mesh or a ` +
      `2-D (replicate, shard) one: slice it first, e.g. mesh.get(["dp_replicate", "dp_shard"])`,
  );
}

/** Shards the parameters of `module` that no group holds yet into one new group. */
function makeGroup(
  module: Module,
  { group, replicate, mesh }: ShardingGroups,
  options: FullyShardOptions,
  root: FSDPState,
  policy: ResolvedPolicy,
): FSDPParamGroup {
  const owners = new Map<Parameter, { fqn: string; owners: ParamOwner[] }>();
  for (const [path, m] of module.namedModules()) {
    for (const [key, value] of Object.entries(m)) {
      if (!(value instanceof Parameter) || managed.has(value)) continue;
      if (value.dtype !== "f32") {
        throw new TypeError(
          `fullyShard: parameter ${
            path ? `${path}.${key}` : key
          } is ${value.dtype}; only f32 is supported`,
        );
      }
      const entry = owners.get(value) ?? { fqn: path ? `${path}.${key}` : key, owners: [] };
      entry.owners.push({ module: m, key });
      owners.set(value, entry);
    }
  }
  const devices = new Set([...owners.keys()].map((p) => p.device));
  if (devices.size > 1) {
    throw new Error(
      `fullyShard: the parameters are on ${[...devices].join(" and ")}; move the module to one ` +
        "device first",
    );
  }
  const device = devices.values().next().value ?? "cpu";
  if (mesh !== null && owners.size > 0 && device.split(":")[0] !== mesh.deviceType) {
    throw new Error(
      `fullyShard: the parameters are on ${device}, but the mesh is a "${mesh.deviceType}" ` +
        "one; move the module to the mesh's device type first",
    );
  }
  const { rank, size } = group;
  let S = 0;
  const offsets = [...owners.keys()].map((p) => {
    const { shardRows, rowNumel } = shardLayout(p.shape, rank, size);
    const offset = S;
    S += shardRows * rowNumel;
    return offset;
  });
  const flat = Tensor.empty([S], "f32", true, device);
  flat.persistent = true;
  const params = [...owners].map(([original, { fqn, owners }], i) => {
    const p = new FSDPParam(fqn, original, owners, flat, offsets[i], rank, size, policy.paramDtype);
    p.replicaRank = replicate?.rank ?? 0;
    managed.set(p.sharded, p);
    managed.set(p.unsharded, p);
    // Over the shard group only: HSDP's replicas hold equal gradients, which would count twice.
    // A tensor-parallel shard's sum goes on across its TP group (see [Note: 2-D parallelism]).
    registerShardedGradient(p.sharded, [
      partialsGatherer(group, device),
      ...shardedGradientGatherers(original),
    ]);
    const placed = tensorParallelPlacement(original);
    if (placed !== undefined) {
      setParamPlacement(p.sharded, placed);
      setParamPlacement(p.unsharded, placed);
    }
    p.expose(false);
    original.dispose();
    return p;
  });
  const { reshardAfterForward = true, forwardPrefetch = true } = options;
  return new FSDPParamGroup(
    params,
    flat,
    group,
    replicate,
    reshardAfterForward,
    forwardPrefetch,
    root,
    policy,
  );
}

/**
 * Hooks the forward (casting its floating-point inputs to `paramDtype` when the policy says so)
 * and adds the FSDP methods, as non-enumerable properties.
 */
function attach(
  module: Module,
  state: FSDPState,
  worldSize: number,
  policy: ResolvedPolicy,
): void {
  const forward = module.forward.bind(module);
  const cast = policy.castForwardInputs && policy.paramDtype !== "f32";
  const paramGroup = state.group!;
  const hidden = (value: unknown) => ({ value, enumerable: false, configurable: true });
  Object.defineProperties(module, {
    [STATE]: hidden(state),
    forward: hidden((...inputs: unknown[]) => {
      // A recompute in backward (see FSDPParamGroup.recomputing) has no forward to end.
      const isRoot = state.root === state && !paramGroup.recomputing;
      let output: unknown;
      try {
        paramGroup.preForward();
        const args = cast ? inputs.map((x) => castFloatInputs(x, policy.paramDtype)) : inputs;
        output = paramGroup.postForward(forward(...args));
      } catch (err) {
        if (isRoot) state.endForward(true);
        throw err;
      }
      if (isRoot) state.endForward(false);
      return output;
    }),
    backward: hidden((loss: Tensor, gradient?: Tensor) =>
      diagnosedOnFailure(callerScope(() => state.backward(loss, gradient)))
    ),
    noSync: hidden(<R>(fn: () => R | Promise<R>) => state.root.noSync(fn)),
    lastStats: { get: () => state.root.lastStats, enumerable: false, configurable: true },
    worldSize: { value: worldSize, enumerable: false, configurable: true },
  });
  // One capture of the user's line for the gathers of the whole forward (src/distributed/ledger.ts).
  const hooked = module.forward as (...inputs: unknown[]) => unknown;
  Object.defineProperty(
    module,
    "forward",
    hidden((...inputs: unknown[]) => callerScope(() => hooked(...inputs))),
  );
}
