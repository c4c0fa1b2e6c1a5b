/**
 * `SequenceParallel`, `PrepareModuleInput` and `PrepareModuleOutput` (PyTorch's styles of the
 * same names): the regions between tensor-parallel layers where each rank keeps its part of the
 * sequence, and explicit redistributions at a module's boundary.
 * @module
 */

import { Parameter } from "../../nn/parameter.ts";
import { Tensor } from "../../tensor/tensor.ts";
import {
  gradSummedUpstream,
  replicateParam,
  setOutputPlacement,
  type StyleTarget,
  wrapForward,
} from "./_params.ts";
import {
  allGatherReduceScatter,
  allGatherSplit,
  identityAllReduce,
  splitAllGather,
} from "./functional.ts";
import { type Placement, Replicate, samePlacement, Shard } from "./placement.ts";
import { ParallelStyle } from "./style.ts";

/** Options of {@linkcode SequenceParallel}. */
export interface SequenceParallelOptions {
  /** The sequence dimension of the input (default 1: [B, T, C]). */
  sequenceDim?: number;
  /** Return the local tensor (default true; with false its placement is recorded). */
  useLocalOutput?: boolean;
}

/**
 * Sequence parallelism (PyTorch's `SequenceParallel`) for a module that works on each position
 * alone: `nn.LayerNorm`, `nn.RMSNorm`, `nn.Dropout`. Its input is this rank's part of the
 * sequence (Shard(sequenceDim)), its output too; its parameters stay whole on every rank, and
 * since each rank saw only its positions, their gradients are summed across the group in
 * backward.
 *
 * Dropout under tensor parallelism: each rank draws its mask over its own local activations
 * (here a part of the sequence; after a column-parallel layer, a part of the features), so the
 * masks cannot equal the one a single process draws over the whole tensor. Training is correct in
 * distribution, not bit for bit; equivalence checks use dropout 0.
 */
export class SequenceParallel extends ParallelStyle {
  readonly #dim: number;
  readonly #local: boolean;

  /**
   * Creates the style.
   *
   * @param options See {@linkcode SequenceParallelOptions}.
   */
  constructor(options: SequenceParallelOptions = {}) {
    super();
    this.#dim = options.sequenceDim ?? 1;
    this.#local = options.useLocalOutput ?? true;
  }

  /** @ignore called by parallelizeModule */
  apply(target: StyleTarget): void {
    const { module, fqn, group } = target;
    if (module.children().next().done !== true) {
      throw new TypeError(
        `SequenceParallel: ${fqn || "the root"} is a ${module.constructor.name} with ` +
          "submodules; apply it to the per-position layers themselves (LayerNorm, Dropout)",
      );
    }
    const keys = Object.entries(module).filter(([, v]) => v instanceof Parameter).map(([k]) => k);
    keys.forEach((k) => replicateParam(target, k));
    const props = module as unknown as Record<string, Tensor>;
    const placement = new Shard(this.#dim), local = this.#local;
    wrapForward(module, (forward, ...inputs: unknown[]) => {
      // The parameters are read through identity nodes whose backward sums the group's partial
      // gradients; the Parameters themselves are put back before returning.
      const saved = keys.map((k) => props[k]);
      let y: Tensor;
      try {
        keys.forEach((k, i) => (props[k] = identityAllReduce(saved[i], group)));
        y = forward(...inputs);
      } finally {
        keys.forEach((k, i) => (props[k] = saved[i]));
      }
      if (!local) setOutputPlacement(y, placement);
      return y;
    });
  }
}

/** Options of {@linkcode PrepareModuleInput}. */
export interface PrepareModuleInputOptions {
  /** What each positional input is (null: leave that input alone). */
  inputLayouts: Placement | null | (Placement | null)[];
  /** What each is to become, in the same positions. */
  desiredInputLayouts: Placement | null | (Placement | null)[];
  /** Accepted as PyTorch's; inputs are always local tensors in dtrain. */
  useLocalOutput?: boolean;
}

/** Options of {@linkcode PrepareModuleOutput}. */
export interface PrepareModuleOutputOptions {
  /** What the module's output is. */
  outputLayouts: Placement;
  /** What it is to become. */
  desiredOutputLayouts: Placement;
  /** Return the local tensor (default true; with false its placement is recorded). */
  useLocalOutput?: boolean;
}

function asList(v: Placement | null | (Placement | null)[]): (Placement | null)[] {
  return Array.isArray(v) ? v : [v];
}

/**
 * Redistributes a module's positional inputs before its forward (PyTorch's
 * `PrepareModuleInput`): Shard(d) to Replicate gathers along d (for a module whose computation
 * is tensor-parallel, such as attention or the MLP between sequence-parallel norms: the partial
 * gradients are reduce-scattered back, and the column-parallel layers inside do not sum them
 * again); Replicate to Shard(d) keeps this rank's chunk (its gradient gathered back).
 */
export class PrepareModuleInput extends ParallelStyle {
  readonly #from: (Placement | null)[];
  readonly #to: (Placement | null)[];

  /**
   * Creates the style.
   *
   * @param options See {@linkcode PrepareModuleInputOptions}.
   */
  constructor(options: PrepareModuleInputOptions) {
    super();
    this.#from = asList(options.inputLayouts);
    this.#to = asList(options.desiredInputLayouts);
    if (this.#from.length !== this.#to.length) {
      throw new RangeError(
        `PrepareModuleInput: ${this.#from.length} inputLayouts but ${this.#to.length} ` +
          "desiredInputLayouts; give one of each per input",
      );
    }
  }

  /** @ignore called by parallelizeModule */
  apply(target: StyleTarget): void {
    const { fqn, group } = target;
    const what = `PrepareModuleInput on ${fqn || "the root"}`;
    this.#from.forEach((from, i) => checkRedistribution(what, from, this.#to[i]));
    wrapForward(target.module, (forward, ...inputs: unknown[]) => {
      const prepared = inputs.map((x, i) => {
        const from = this.#from[i], to = this.#to[i];
        if (from == null || to == null) return x;
        if (!(x instanceof Tensor)) throw new TypeError(`${what}: input ${i} is not a tensor`);
        if (samePlacement(from, to, x.ndim)) return x;
        if (from instanceof Shard) {
          const y = allGatherReduceScatter(x, from.dim, group);
          gradSummedUpstream.add(y);
          return y;
        }
        return splitAllGather(x, (to as Shard).dim, group);
      });
      return forward(...prepared);
    });
  }
}

/**
 * Redistributes a module's output after its forward (PyTorch's `PrepareModuleOutput`):
 * Shard(d) to Replicate gathers along d (for computation every rank repeats: the gradient is
 * sliced back), Replicate to Shard(d) keeps this rank's chunk (its gradient gathered back, as for
 * `transformer.wpe` under sequence parallelism).
 */
export class PrepareModuleOutput extends ParallelStyle {
  readonly #options: PrepareModuleOutputOptions;

  /**
   * Creates the style.
   *
   * @param options See {@linkcode PrepareModuleOutputOptions}.
   */
  constructor(options: PrepareModuleOutputOptions) {
    super();
    this.#options = options;
  }

  /** @ignore called by parallelizeModule */
  apply(target: StyleTarget): void {
    const { fqn, group } = target;
    const { outputLayouts: from, desiredOutputLayouts: to, useLocalOutput } = this.#options;
    const what = `PrepareModuleOutput on ${fqn || "the root"}`;
    checkRedistribution(what, from, to);
    wrapForward(target.module, (forward, ...inputs: unknown[]) => {
      const y = forward(...inputs);
      if (!(y instanceof Tensor)) throw new TypeError(`${what}: the output is not a tensor`);
      let out = y;
      if (!samePlacement(from, to, y.ndim)) {
        out = from instanceof Shard
          ? allGatherSplit(y, from.dim, group)
          : splitAllGather(y, (to as Shard).dim, group);
      }
      if (useLocalOutput === false) setOutputPlacement(out, to);
      return out;
    });
  }
}

/** Refuses Shard(a) to Shard(b) for a ≠ b (an all-to-all dtrain does not have). */
function checkRedistribution(what: string, from: Placement | null, to: Placement | null): void {
  if (from == null || to == null) return;
  for (const p of [from, to]) {
    if (!(p instanceof Shard || p instanceof Replicate)) {
      throw new TypeError(`${what}: ${p} is not a placement (use Shard(d) or Replicate())`);
    }
  }
  if (from instanceof Shard && to instanceof Shard && from.dim !== to.dim) {
    throw new RangeError(`${what}: ${from} to ${to} is not supported (only via Replicate)`);
  }
}
