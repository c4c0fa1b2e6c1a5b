/**
 * Losses with PyTorch's `reduction` ("mean", "sum", "none"): cross-entropy (with `ignoreIndex` and
 * `labelSmoothing`), binary cross-entropy on logits, mean squared error.
 *
 * The fused kernels in src/tensor compute the mean forms; the others are composed here from
 * tensor ops. Cross-entropy's composed path builds an [N, C] weight matrix on the host (one-hot
 * target, smoothed), which is fine for byte- or character-level vocabularies; a kernel with
 * reduction and smoothing arguments would avoid it for large C.
 * @module
 */

import { tensor } from "../tensor/creation.ts";
import {
  crossEntropy as fusedCrossEntropy,
  logSoftmax,
  mseLoss as fusedMseLoss,
} from "../tensor/ops/nn.ts";
import { formatShape, type Tensor } from "../tensor/tensor.ts";
import { expectF32, sameShape } from "./_checks.ts";

/** How a loss combines its per-element values: their mean, their sum, or none (kept as is). */
export type Reduction = "mean" | "sum" | "none";

function checkReduction(op: string, reduction: Reduction | undefined): Reduction {
  const r = reduction ?? "mean";
  if (r !== "mean" && r !== "sum" && r !== "none") {
    throw new RangeError(`${op}: reduction must be "mean", "sum" or "none", got "${r}"`);
  }
  return r;
}

function reduce(loss: Tensor, reduction: Reduction): Tensor {
  return reduction === "none" ? loss : reduction === "sum" ? loss.sum() : loss.mean();
}

/** Options of {@linkcode crossEntropy}. */
export interface CrossEntropyOptions {
  /** "mean" (default, over the targets not ignored), "sum", or "none" (one loss per row). */
  reduction?: Reduction;
  /** Targets equal to this are left out of the loss and the mean (default -100, as PyTorch). */
  ignoreIndex?: number;
  /**
   * In [0, 1]: the target distribution becomes `(1 - labelSmoothing)` on the class plus
   * `labelSmoothing / C` on every class (default 0).
   */
  labelSmoothing?: number;
}

/**
 * Cross-entropy between logits [N, C] and integer class targets [N] (i32), PyTorch's
 * `F.cross_entropy`.
 *
 * @example Per-row losses, one target ignored
 * ```ts
 * import assert from "node:assert/strict";
 * import { F, tensor } from "../../mod.ts";
 * const logits = tensor([[0, 0], [0, 0]]);
 * const targets = tensor([1, -100], [2], { dtype: "i32" });
 * const loss = F.crossEntropy(logits, targets, { reduction: "none" });
 * assert.deepEqual(Array.from(loss.toArray(), (v) => v.toFixed(4)), ["0.6931", "0.0000"]);
 * ```
 */
export function crossEntropy(
  input: Tensor,
  target: Tensor,
  options: CrossEntropyOptions = {},
): Tensor {
  const reduction = checkReduction("crossEntropy", options.reduction);
  const ignoreIndex = options.ignoreIndex ?? -100;
  const smoothing = options.labelSmoothing ?? 0;
  if (!(smoothing >= 0 && smoothing <= 1)) {
    throw new RangeError(`crossEntropy: labelSmoothing must be in [0, 1], got ${smoothing}`);
  }
  if (!Number.isInteger(ignoreIndex)) {
    throw new RangeError(`crossEntropy: ignoreIndex must be an integer, got ${ignoreIndex}`);
  }
  if (smoothing === 0 && reduction === "mean") {
    return fusedCrossEntropy(input, target, { ignoreIndex });
  }
  expectF32("crossEntropy", input);
  if (target.dtype !== "i32") {
    throw new TypeError(`crossEntropy: target must be i32 class indices, got ${target.dtype}`);
  }
  if (input.ndim !== 2 || target.ndim !== 1 || target.shape[0] !== input.shape[0]) {
    throw new RangeError(
      `crossEntropy: expected input [N, C] and target [N], got ${formatShape(input.shape)} and ${
        formatShape(target.shape)
      }`,
    );
  }
  const [rows, classes] = input.shape;
  const targets = target.toArray();
  let valid = 0;
  targets.forEach((t, i) => {
    if (t === ignoreIndex) return;
    if (!(t >= 0 && t < classes)) {
      throw new RangeError(
        `crossEntropy: target ${t} at index ${i} is out of range for ${classes} classes`,
      );
    }
    valid++;
  });
  if (reduction === "sum" && smoothing === 0 && valid > 0) {
    // The fused mean over the valid rows, times their count.
    return fusedCrossEntropy(input, target, { ignoreIndex }).mul(valid);
  }
  // loss_i = -sum_c w_ic log p_ic, with w = (1 - eps) one-hot + eps / C, and 0 on ignored rows:
  // PyTorch's (1 - eps) * nll + eps * mean_c(-log p).
  const weights = new Float32Array(rows * classes);
  targets.forEach((t, i) => {
    if (t === ignoreIndex) return;
    weights.fill(smoothing / classes, i * classes, (i + 1) * classes);
    weights[i * classes + t] += 1 - smoothing;
  });
  const w = tensor(weights, [rows, classes]);
  const perRow = logSoftmax(input).mul(w).sum(-1).neg();
  if (reduction === "none") return perRow;
  const total = perRow.sum();
  return reduction === "sum" ? total : total.div(valid);
}

/** Options of {@linkcode binaryCrossEntropyWithLogits}. */
export interface BCEWithLogitsOptions {
  /** "mean" (default), "sum" or "none". */
  reduction?: Reduction;
  /** A rescaling weight per element, broadcast to the input's shape. */
  weight?: Tensor | null;
  /** A weight of the positive term per class (the last dimension), as PyTorch's `pos_weight`. */
  posWeight?: Tensor | null;
}

/**
 * Binary cross-entropy of logits against targets in [0, 1] of the same shape, PyTorch's
 * `F.binary_cross_entropy_with_logits`, in the numerically stable form
 * `(1 - y) x + (1 + (posWeight - 1) y) (log(1 + exp(-|x|)) + max(-x, 0))`.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { F, tensor } from "../../mod.ts";
 * const loss = F.binaryCrossEntropyWithLogits(tensor([0, 100]), tensor([1, 1]));
 * assert.ok(Math.abs(loss.item() - Math.log(2) / 2) < 1e-6);
 * ```
 */
export function binaryCrossEntropyWithLogits(
  input: Tensor,
  target: Tensor,
  options: BCEWithLogitsOptions = {},
): Tensor {
  const op = "binaryCrossEntropyWithLogits";
  const reduction = checkReduction(op, options.reduction);
  const { weight, posWeight } = options;
  expectF32(op, input, target, ...[weight, posWeight].filter((t): t is Tensor => !!t));
  if (!sameShape(input.shape, target.shape)) {
    throw new RangeError(
      `${op}: target ${formatShape(target.shape)} must have the input's shape ${
        formatShape(input.shape)
      }`,
    );
  }
  const x = input;
  const negPart = x.neg().relu(); // max(-x, 0)
  const absX = x.relu().add(negPart);
  const softplusNeg = absX.neg().exp().add(1).log().add(negPart); // log(1 + exp(-x)), stable
  const logWeight = posWeight ? posWeight.sub(1).mul(target).add(1) : null;
  let loss = target.neg().add(1).mul(x).add(logWeight ? logWeight.mul(softplusNeg) : softplusNeg);
  if (weight) loss = loss.mul(weight);
  return reduce(loss, reduction);
}

/** Options of {@linkcode mseLoss}. */
export interface MSELossOptions {
  /** "mean" (default), "sum" or "none". */
  reduction?: Reduction;
}

/**
 * Squared error between `input` and `target` of the same shape, PyTorch's `F.mse_loss`.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { F, tensor } from "../../mod.ts";
 * assert.equal(F.mseLoss(tensor([1, 3]), tensor([0, 0]), { reduction: "sum" }).item(), 10);
 * ```
 */
export function mseLoss(input: Tensor, target: Tensor, options: MSELossOptions = {}): Tensor {
  const reduction = checkReduction("mseLoss", options.reduction);
  if (reduction === "none") {
    expectF32("mseLoss", input, target);
    if (!sameShape(input.shape, target.shape)) {
      throw new RangeError(
        `mseLoss: input ${formatShape(input.shape)} and target ${formatShape(target.shape)} differ`,
      );
    }
    const diff = input.sub(target);
    return diff.mul(diff);
  }
  const mean = fusedMseLoss(input, target);
  return reduction === "mean" ? mean : mean.mul(input.numel());
}
