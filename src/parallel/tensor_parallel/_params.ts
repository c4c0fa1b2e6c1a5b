/**
 * What the parallel styles share: turning a module's parameter into this rank's shard (once per
 * tensor, so that tied parameters stay one tensor), registering the shard with clipGradNorm,
 * wrapping a module's forward, and the marks that say which module and activation were placed.
 * @module
 */

import type { ProcessGroup } from "../../distributed/process_group.ts";
import type { Module } from "../../nn/module.ts";
import { Parameter } from "../../nn/parameter.ts";
import { registerShardedGradient } from "../../nn/utils/clip_grad.ts";
import { partialsGatherer } from "../_norm_partials.ts";
import { noGrad } from "../../tensor/autograd.ts";
import { cat } from "../../tensor/ops/indexing.ts";
import type { Tensor } from "../../tensor/tensor.ts";
import {
  type Placement,
  Replicate,
  setParamPlacement,
  Shard,
  shardRanges,
  tensorParallelPlacement,
} from "./placement.ts";

/** Where a style is applied: the module, its fully qualified name, the root, and the group. */
export interface StyleTarget {
  /** The module the style changes. */
  module: Module;
  /** Its dotted name in the root ("" for the root itself), for error messages. */
  fqn: string;
  /** The module `parallelizeModule` was called on (to replace tied parameters everywhere). */
  root: Module;
  /** The tensor-parallel group. */
  group: ProcessGroup;
}

/** The modules a style changed (a sharded parameter read by an unstyled module is an error). */
export const styled = new WeakSet<Module>();

/**
 * What each module a Linear style (ColwiseParallel, RowwiseParallel) changed gives as its local
 * output, for the checks that look at a plan as a whole (a fused q|k|v projection's consumer).
 */
export const linearOutputs = new WeakMap<Module, Placement>();

/**
 * Replaces `target.module[key]` by this rank's shard of it along `placement` (in `chunks` fused
 * parts), in every module of the root that holds the same tensor, and returns the shard. A
 * parameter already sharded the same way (a tied one) is kept; another way is an error.
 */
export function placeParam(
  target: StyleTarget,
  key: string,
  placement: Shard,
  chunks = 1,
): Parameter {
  const { module, fqn, group } = target;
  const name = fqn ? `${fqn}.${key}` : key;
  const original = (module as unknown as Record<string, unknown>)[key];
  if (!(original instanceof Parameter)) {
    throw new TypeError(`parallelizeModule: ${name} is not a Parameter`);
  }
  const known = tensorParallelPlacement(original);
  if (known !== undefined) {
    const same = known.placement instanceof Shard && known.chunks === chunks &&
      normDim(known.placement.dim, known.fullShape.length) ===
        normDim(placement.dim, original.ndim);
    if (!same) {
      throw new Error(
        `parallelizeModule: ${name} is already placed as ${known.placement} (chunks ${known.chunks}), ` +
          `cannot place it as ${placement} (chunks ${chunks}); a tied parameter needs one placement`,
      );
    }
    return original;
  }
  const d = normDim(placement.dim, original.ndim);
  const length = original.shape[d];
  if (d < 0 || d >= original.ndim || length % (chunks * group.size) !== 0) {
    const parts = chunks === 1 ? `${group.size} parts` : `${chunks} chunks of ${group.size} parts`;
    throw new RangeError(
      `parallelizeModule: ${name} [${original.shape}] cannot be split on dim ${placement.dim} ` +
        `into ${parts} (tensor-parallel size ${group.size})`,
    );
  }
  const ranges = shardRanges(length, chunks, group.rank, group.size);
  const local = noGrad(() => {
    const parts = ranges.map((r) => original.narrow(d, r.start, r.length));
    return parts.length === 1 ? parts[0].contiguous() : cat(parts, d);
  });
  const shard = new Parameter(local, original.requiresGrad);
  local.dispose();
  setParamPlacement(shard, { placement, fullShape: [...original.shape], chunks, group });
  registerShardedGradient(shard, partialsGatherer(group, shard.device));
  replaceEverywhere(target.root, original, shard);
  original.dispose();
  return shard;
}

/** Records that `target.module[key]` (if a parameter) is replicated across the group. */
export function replicateParam(target: StyleTarget, key: string): void {
  const p = (target.module as unknown as Record<string, unknown>)[key];
  if (!(p instanceof Parameter) || tensorParallelPlacement(p) !== undefined) return;
  setParamPlacement(p, {
    placement: new Replicate(),
    fullShape: [...p.shape],
    chunks: 1,
    group: target.group,
  });
}

function normDim(dim: number, ndim: number): number {
  return dim < 0 ? dim + ndim : dim;
}

/** Points every property of every module of `root` holding `from` at `to`. */
function replaceEverywhere(root: Module, from: Parameter, to: Parameter): void {
  for (const m of root.modules()) {
    const props = m as unknown as Record<string, unknown>;
    for (const [key, value] of Object.entries(m)) if (value === from) props[key] = to;
  }
}

/**
 * Replaces `module.forward` by `wrapped(forward, ...inputs)` (a non-enumerable property, as FSDP
 * does, so the module walk does not see it), and marks the module as styled.
 */
export function wrapForward(
  module: Module,
  // deno-lint-ignore no-explicit-any
  wrapped: (forward: (...inputs: any[]) => any, ...inputs: any[]) => any,
): void {
  const forward = module.forward.bind(module);
  Object.defineProperty(module, "forward", {
    value: (...inputs: unknown[]) => wrapped(forward, ...inputs),
    enumerable: false,
    configurable: true,
    writable: true,
  });
  styled.add(module);
}

/**
 * Activations made Replicate by `PrepareModuleInput` whose backward already sums the partial
 * gradients of the tensor-parallel computation consuming them, so that a column-parallel Linear
 * reading one does not sum them again.
 */
export const gradSummedUpstream = new WeakSet<Tensor>();

const outputPlacements = new WeakMap<Tensor, Placement>();

/** Records the placement of a style's output made with `useLocalOutput: false`. */
export function setOutputPlacement(t: Tensor, placement: Placement): void {
  outputPlacements.set(t, placement);
}

/**
 * The placement a parallel style gave its output when made with `useLocalOutput: false` (where
 * PyTorch would return a DTensor; dtrain returns the local tensor and records its placement);
 * undefined otherwise.
 *
 * @param t A module's output.
 */
export function outputPlacement(t: Tensor): Placement | undefined {
  return outputPlacements.get(t);
}
