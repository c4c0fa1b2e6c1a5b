/**
 * `ColwiseParallel` and `RowwiseParallel` (PyTorch's `torch.distributed.tensor.parallel` styles)
 * for `nn.Linear` and `nn.Embedding`, and the base of every style. A column-parallel Linear holds
 * its rows of the weight (output features); a row-parallel one its columns (input features),
 * summing the partial outputs across the group. Inputs and outputs are local tensors; the layouts
 * say what each rank's local tensor is (see placement.ts).
 * @module
 */

import { Embedding, Linear } from "../../nn/layers.ts";
import { noGrad, record } from "../../tensor/autograd.ts";
import { tensor, zerosLike } from "../../tensor/creation.ts";
import { linear } from "../../tensor/ops/matmul.ts";
import { embedding } from "../../tensor/ops/nn.ts";
import type { Tensor } from "../../tensor/tensor.ts";
import {
  gradSummedUpstream,
  linearOutputs,
  placeParam,
  replicateParam,
  setOutputPlacement,
  type StyleTarget,
  wrapForward,
} from "./_params.ts";
import {
  allGatherReduceScatter,
  allGatherSplit,
  identityAllReduce,
  reduceScatterAllGather,
  splitAllGather,
} from "./functional.ts";
import { type Placement, Replicate, Shard } from "./placement.ts";

/** A way to parallelize one module (PyTorch's `ParallelStyle`), applied by `parallelizeModule`. */
export abstract class ParallelStyle {
  /**
   * Changes `target.module` in place: its parameters become this rank's shards and its forward
   * redistributes at the boundaries.
   * @ignore called by parallelizeModule
   */
  abstract apply(target: StyleTarget): void;
}

/** Options of {@linkcode ColwiseParallel} and {@linkcode RowwiseParallel}. */
export interface LinearStyleOptions {
  /** What each rank's input is (Colwise: Replicate() by default; Rowwise: Shard(-1)). */
  inputLayouts?: Placement;
  /** What each rank's output is to be (Colwise: Shard(-1) by default; Rowwise: Replicate()). */
  outputLayouts?: Placement;
  /**
   * Return the local tensor (default true). dtrain always returns local tensors; with false the
   * output's placement is recorded, readable with `outputPlacement`, where PyTorch returns a
   * DTensor.
   */
  useLocalOutput?: boolean;
}

/** Options of {@linkcode ColwiseParallel}. */
export interface ColwiseOptions extends LinearStyleOptions {
  /**
   * The output features are this many fused parts, each split across the group (a fused q|k|v
   * projection: 3, so that each rank holds its heads' q, k and v); default 1. Needs a Shard(-1)
   * output.
   */
  chunks?: number;
}

function checkLayout(what: string, fqn: string, got: Placement, allowed: string[]): void {
  const name = got instanceof Replicate ? "Replicate" : `Shard(${got.dim})`;
  const ok = allowed.some((a) => a === name || (a === "Shard" && got instanceof Shard));
  if (!ok) {
    throw new RangeError(
      `${what} on ${fqn || "the root"}: layout ${got} is not supported (use ${allowed.join(", ")})`,
    );
  }
}

function wrongType(what: string, target: StyleTarget, supported: string): never {
  throw new TypeError(
    `${what}: ${target.fqn || "the root"} is a ${target.module.constructor.name}; ${what} ` +
      `supports ${supported}`,
  );
}

/**
 * Column-wise parallelism (PyTorch's `ColwiseParallel`): an `nn.Linear`'s weight and bias are
 * split on dim 0 (output features), an `nn.Embedding`'s weight on dim 1 (embedding features).
 * The input is Replicate (the gradient of a replicated input is summed across the group in
 * backward) or Shard(d) (gathered along d forward, reduce-scattered backward: sequence
 * parallelism); the output is Shard(-1) (local) or Replicate (gathered on the last dim).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { parallel } from "../../../mod.ts";
 * const style = new parallel.ColwiseParallel({ outputLayouts: new parallel.Replicate() });
 * assert.ok(style instanceof parallel.ParallelStyle);
 * ```
 */
export class ColwiseParallel extends ParallelStyle {
  readonly #input: Placement;
  readonly #output: Placement;
  readonly #local: boolean;
  readonly #chunks: number;

  /**
   * Creates the style.
   *
   * @param options See {@linkcode ColwiseOptions}.
   */
  constructor(options: ColwiseOptions = {}) {
    super();
    this.#input = options.inputLayouts ?? new Replicate();
    this.#output = options.outputLayouts ?? new Shard(-1);
    this.#local = options.useLocalOutput ?? true;
    this.#chunks = options.chunks ?? 1;
    if (!Number.isInteger(this.#chunks) || this.#chunks < 1) {
      throw new RangeError(
        `ColwiseParallel: chunks must be a positive integer, got ${this.#chunks}`,
      );
    }
  }

  /** @ignore called by parallelizeModule */
  apply(target: StyleTarget): void {
    const what = "ColwiseParallel", { module, fqn, group } = target;
    checkLayout(what, fqn, this.#input, ["Replicate", "Shard"]);
    checkLayout(what, fqn, this.#output, ["Replicate", "Shard(-1)"]);
    if (this.#chunks > 1 && this.#output instanceof Replicate) {
      throw new RangeError(
        `${what} on ${fqn}: chunks ${this.#chunks} needs a Shard(-1) output (a gathered output ` +
          "would interleave the chunks)",
      );
    }
    let ids = false;
    if (module instanceof Linear) {
      placeParam(target, "weight", new Shard(0), this.#chunks);
      if (module.bias) placeParam(target, "bias", new Shard(0), this.#chunks);
    } else if (module instanceof Embedding) {
      if (this.#chunks > 1) throw new RangeError(`${what} on ${fqn}: chunks needs an nn.Linear`);
      placeParam(target, "weight", new Shard(1));
      ids = true;
    } else {
      wrongType(what, target, "nn.Linear and nn.Embedding");
    }
    const input = this.#input, output = this.#output, local = this.#local;
    linearOutputs.set(module, output);
    wrapForward(module, (forward, x: Tensor) => {
      let y: Tensor;
      if (ids || gradSummedUpstream.has(x)) y = forward(x);
      else if (input instanceof Shard) y = forward(allGatherReduceScatter(x, input.dim, group));
      else y = forward(identityAllReduce(x, group));
      if (output instanceof Replicate) y = allGatherSplit(y, -1, group);
      if (!local) setOutputPlacement(y, output);
      return y;
    });
  }
}

/**
 * Row-wise parallelism (PyTorch's `RowwiseParallel`): an `nn.Linear`'s weight is split on dim 1
 * (input features) and its input is Shard(-1) (a column-parallel layer's local output) or
 * Replicate (split here); an `nn.Embedding`'s weight on dim 0 (the vocabulary: each rank looks up
 * the tokens in its rows, zeros elsewhere) with Replicate token ids. The partial outputs are
 * summed across the group: all-reduced to Replicate (default), or reduce-scattered to Shard(1)
 * for sequence parallelism. A Linear's bias stays whole, added once after the sum (its gradient
 * summed across the group when the output is sequence-sharded).
 */
export class RowwiseParallel extends ParallelStyle {
  readonly #input: Placement | undefined;
  readonly #output: Placement;
  readonly #local: boolean;

  /**
   * Creates the style.
   *
   * @param options See {@linkcode LinearStyleOptions}.
   */
  constructor(options: LinearStyleOptions = {}) {
    super();
    this.#input = options.inputLayouts;
    this.#output = options.outputLayouts ?? new Replicate();
    this.#local = options.useLocalOutput ?? true;
  }

  /** @ignore called by parallelizeModule */
  apply(target: StyleTarget): void {
    const what = "RowwiseParallel", { module, fqn, group } = target;
    checkLayout(what, fqn, this.#output, ["Replicate", "Shard"]);
    const output = this.#output, local = this.#local;
    linearOutputs.set(module, output);
    // y is always a product just computed here, which nothing saved for backward: the
    // all-reduce may overwrite it (see sumOwned).
    const reduce = (y: Tensor) =>
      output instanceof Shard ? reduceScatterAllGather(y, output.dim, group) : sumOwned(y, group);
    const finish = (y: Tensor) => {
      if (!local) setOutputPlacement(y, output);
      return y;
    };
    if (module instanceof Linear) {
      const input = this.#input ?? new Shard(-1);
      checkLayout(what, fqn, input, ["Shard(-1)", "Replicate"]);
      // The weight is read from the module at call time (FSDP swaps in its full parameter), so
      // only its column count is kept.
      const columns = placeParam(target, "weight", new Shard(1)).shape[1];
      replicateParam(target, "bias");
      const linearModule = module;
      wrapForward(module, (_forward, x: Tensor) => {
        const xs = input instanceof Replicate ? splitAllGather(x, -1, group) : x;
        if (xs.shape[xs.ndim - 1] !== columns) {
          throw new RangeError(
            `${what} on ${fqn}: the input's last dim is ${xs.shape[xs.ndim - 1]}, this rank's ` +
              `shard of the weight takes ${columns} (is the input the local shard?)`,
          );
        }
        // The bias goes into rank 0's partial product (the others add zeros), so the sum over
        // ranks adds it once and no separate add allocates another activation. Its gradient is
        // linear's, the sum of the output's gradient, which every rank holds whole (Replicate
        // output, or the gather in reduceScatterAllGather's backward): the full gradient on each.
        const bias = linearModule.bias;
        const ownBias = bias && (group.rank === 0 ? bias : zeroForward(bias));
        return finish(reduce(linear(xs, linearModule.weight, ownBias)));
      });
    } else if (module instanceof Embedding) {
      checkLayout(what, fqn, this.#input ?? new Replicate(), ["Replicate"]);
      placeParam(target, "weight", new Shard(0));
      const emb = module;
      wrapForward(module, (_forward, ids: Tensor) => {
        const rows = emb.weight.shape[0], start = group.rank * rows;
        const [localIds, mask] = maskedIds(ids, start, rows);
        // The ids and mask are read in backward: the caller's scope frees them, as any input.
        return finish(reduce(embedding(localIds, emb.weight).mul(mask)));
      });
    } else {
      wrongType(what, target, "nn.Linear and nn.Embedding");
    }
  }
}

/**
 * `y` summed over the group in its own storage, with an identity backward: `allReduceIdentity`
 * without its copy, for a tensor just computed by the caller and saved by nothing for backward (a
 * matrix product's output: its backward reads its inputs), so that a row-parallel layer holds one
 * activation of its output's size instead of three.
 */
function sumOwned(y: Tensor, group: StyleTarget["group"]): Tensor {
  const out = noGrad(() => y.detach()); // an alias: the collective writes y's storage
  group.allReduceBlocking(out, "sum");
  return record(out, "AllReduceIdentityBackward", [y], (g) => [g.alias()], [], []);
}

/** Zeros of `t`'s shape whose gradient goes to `t` unchanged. */
function zeroForward(t: Tensor): Tensor {
  return record(noGrad(() => zerosLike(t)), "ZeroForwardBackward", [t], (g) => [g.alias()], [], []);
}

/**
 * Token ids relative to this rank's rows `start .. start + rows - 1` (0 for the others) and a
 * mask [...ids.shape, 1] of 1 where the id is this rank's, computed on the host (ids are small).
 */
function maskedIds(ids: Tensor, start: number, rows: number): [Tensor, Tensor] {
  if (ids.dtype !== "i32") {
    throw new TypeError(`RowwiseParallel: an Embedding's input must be i32 ids, got ${ids.dtype}`);
  }
  const all = ids.toArray() as Int32Array;
  const local = new Int32Array(all.length), mask = new Float32Array(all.length);
  for (let i = 0; i < all.length; i++) {
    const mine = all[i] >= start && all[i] < start + rows;
    local[i] = mine ? all[i] - start : 0;
    mask[i] = mine ? 1 : 0;
  }
  const device = ids.device;
  return [
    tensor(local, [...ids.shape], { dtype: "i32", device }),
    tensor(mask, [...ids.shape, 1], { device }),
  ];
}
