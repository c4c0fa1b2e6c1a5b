/**
 * Gradient clipping by total norm, PyTorch's `torch.nn.utils.clip_grad_norm_`.
 *
 * [Note: sharded gradients]
 * Under FSDP each rank holds only its rows of a gradient, so the total norm needs every rank's
 * partial sum. The sharding layer registers, for each sharded parameter, a function that turns
 * this rank's partial sum into every rank's (a blocking all-gather of one number); the partials
 * of sharded gradients are combined in rank order, the same on every rank, before the root is
 * taken. nn knows nothing of process groups: it only calls what was registered.
 *
 * A parameter sharded over several groups (tensor parallelism within, FSDP across: its rows of a
 * tensor-parallel shard) registers a chain of gatherers: the partial is combined across the first
 * group, that result across the second, and so on, so that every element of the full parameter
 * counts once over the whole mesh. A group along which the gradient is replicated (HSDP's
 * replicas, a tensor-parallel Replicate) is left out of the chain, so that it counts once.
 * @module
 */

import { noGrad } from "../../tensor/autograd.ts";
import { formatShape, type Tensor } from "../../tensor/tensor.ts";
import { sumSquares } from "../../tensor/ops/reduce.ts";
import { isFloat, isHalf } from "../../tensor/dtype.ts";

/** Options of {@linkcode clipGradNorm}. */
export interface ClipGradNormOptions {
  /** Throw when the total norm is NaN or infinite instead of scaling by it (default false). */
  errorIfNonfinite?: boolean;
  /**
   * Gathers this rank's power sum from every rank of a group whose ranks hold different
   * parameters (a pipeline's stages: torchtitan's `pp_mesh`), so that the total norm is the whole
   * model's; called once, on every rank of that group. Default: none.
   */
  sumAcross?: GatherPartials;
  /**
   * Gradients to scale by the same coefficient without counting them in the norm: copies of
   * parameters counted elsewhere (a pipeline's tied embedding, counted on its first stage).
   */
  alsoScale?: Iterable<Tensor>;
}

/** Every rank's value of `partial`, in rank order (see [Note: sharded gradients]). */
export type GatherPartials = (partial: number) => number[];

const shardedBy = new WeakMap<Tensor, readonly GatherPartials[]>();
const gatherIds = new WeakMap<GatherPartials, number>();
let nextGatherId = 0;

/**
 * Marks `param` as one rank's shard of a larger parameter, so that {@linkcode clipGradNorm}
 * combines its gradient's norm across ranks with `gather` (called by `parallel.fullyShard` and
 * the tensor-parallel styles). A list is a chain, applied in order (see
 * [Note: sharded gradients]); it replaces what was registered before.
 *
 * @param param The shard.
 * @param gather Returns every rank's partial sum; the same function for the same process group.
 * Or a list of them, one per group the parameter is sharded over.
 */
export function registerShardedGradient(
  param: Tensor,
  gather: GatherPartials | readonly GatherPartials[],
): void {
  const chain = typeof gather === "function" ? [gather] : [...gather];
  for (const g of chain) {
    if (typeof g !== "function") {
      throw new TypeError(`registerShardedGradient: a gatherer must be a function, got ${g}`);
    }
    if (!gatherIds.has(g)) gatherIds.set(g, nextGatherId++);
  }
  if (chain.length === 0) shardedBy.delete(param);
  else shardedBy.set(param, chain);
}

/**
 * The chain of gatherers registered for `param` (empty when it is whole on every rank), so that a
 * layer sharding a shard again can extend it.
 *
 * @param param A parameter.
 */
export function shardedGradientGatherers(param: Tensor): readonly GatherPartials[] {
  return shardedBy.get(param) ?? [];
}

/**
 * The p-th power sum of |g| over one gradient, read back as a number (the max for p = inf). A
 * bf16 or f16 gradient is summed in f32 (PyTorch rounds each norm to the gradient's dtype).
 */
function powerSum(g: Tensor, p: number): number {
  if (isHalf(g.dtype)) {
    const wide = g.to("f32");
    const value = powerSum(wide, p);
    wide.dispose();
    return value;
  }
  if (p === Infinity) {
    let max = 0;
    for (const v of g.toArray()) max = Math.max(max, Math.abs(v)); // NaN stays NaN
    return max;
  }
  if (p === 2) {
    const squares = sumSquares(g); // one pass, no temporary of the gradient's size
    const value = squares.item();
    squares.dispose();
    return value;
  }
  const squares = g.mul(g);
  const powered = squares.pow(p / 2);
  const total = powered.sum();
  const value = total.item();
  for (const t of new Set([squares, powered, total])) t.dispose();
  return value;
}

/**
 * Scales the gradients of `parameters` in place so that their total `normType`-norm (the norm of
 * all gradients concatenated) is at most `maxNorm`: each is multiplied by
 * `min(1, maxNorm / (total + 1e-6))`, as PyTorch does. Parameters without a gradient are skipped.
 *
 * Returns the total norm before clipping as a number; PyTorch returns a 0-d tensor, dtrain reads
 * it back anyway to scale and so hands over the value (nothing to dispose).
 *
 * @param parameters The parameters (or one), usually `model.parameters()`.
 * @param maxNorm The largest allowed total norm.
 * @param normType The p of the p-norm: 2 (default), any positive number, or `Infinity`.
 * @param options See {@linkcode ClipGradNormOptions}.
 *
 * @example Clip before the optimizer step
 * ```ts
 * import assert from "node:assert/strict";
 * import { nn, tensor } from "../../../mod.ts";
 * const p = new nn.Parameter(tensor([0, 0]));
 * p.grad = tensor([3, 4]);
 * const total = nn.utils.clipGradNorm([p], 1);
 * assert.equal(total, 5);
 * assert.deepEqual(Array.from(p.grad.toArray(), (v) => v.toFixed(4)), ["0.6000", "0.8000"]);
 * ```
 */
export function clipGradNorm(
  parameters: Iterable<Tensor> | Tensor,
  maxNorm: number,
  normType = 2,
  options: ClipGradNormOptions = {},
): number {
  if (typeof maxNorm !== "number" || Number.isNaN(maxNorm)) {
    throw new TypeError(`clipGradNorm: maxNorm must be a number, got ${maxNorm}`);
  }
  if (!(normType > 0)) {
    throw new RangeError(`clipGradNorm: normType must be positive or Infinity, got ${normType}`);
  }
  const params = "shape" in parameters ? [parameters as Tensor] : [...parameters];
  const hasGrad = (p: Tensor) => p.grad !== null && !p.grad.disposed;
  const grads = params.filter(hasGrad).map((p) => p.grad!);
  // Every rank must take part in the gathers, gradient or not (see [Note: sharded gradients]).
  // Parameters with the same chain share its gathers; the chains come in parameter order, the
  // same on every rank.
  const gathers = new Map<string, { chain: readonly GatherPartials[]; shards: Tensor[] }>();
  for (const p of params) {
    const chain = shardedBy.get(p);
    if (chain === undefined) continue;
    const key = chain.map((g) => gatherIds.get(g)).join(",");
    const entry = gathers.get(key) ?? { chain, shards: [] };
    entry.shards.push(p);
    gathers.set(key, entry);
  }
  const others = [...(options.alsoScale ?? [])].filter(hasGrad).map((p) => p.grad!);
  const across = options.sumAcross;
  if (grads.length === 0 && gathers.size === 0 && across === undefined) return 0;
  for (const g of grads) {
    if (!g.isContiguous() || !isFloat(g.dtype)) {
      throw new TypeError(
        `clipGradNorm: gradients must be contiguous f32, bf16 or f16, got a ${g.dtype} ${
          formatShape(g.shape)
        } one that is ${g.isContiguous() ? "contiguous" : "not contiguous"}`,
      );
    }
  }
  const combine = (sums: number[]) =>
    normType === Infinity ? Math.max(0, ...sums) : sums.reduce((a, b) => a + b, 0);
  const total = noGrad(() => {
    const sums = params.filter((p) => hasGrad(p) && !shardedBy.has(p)).map((p) =>
      powerSum(p.grad!, normType)
    );
    for (const { chain, shards } of gathers.values()) {
      let partial = combine(shards.filter(hasGrad).map((p) => powerSum(p.grad!, normType)));
      for (const gather of chain) partial = combine(gather(partial));
      sums.push(partial);
    }
    const sum = across === undefined ? combine(sums) : combine(across(combine(sums)));
    return normType === Infinity ? sum : sum ** (1 / normType);
  });
  if (!Number.isFinite(total) && options.errorIfNonfinite) {
    throw new RangeError(
      `clipGradNorm: the total norm of order ${normType} of the gradients is ${total}, so it ` +
        "cannot be clipped; pass { errorIfNonfinite: false } to scale by it anyway",
    );
  }
  const coefficient = maxNorm / (total + 1e-6);
  if (coefficient < 1 || Number.isNaN(coefficient)) {
    noGrad(() => [...grads, ...others].forEach((g) => g.mul_(coefficient)));
  }
  return total;
}
