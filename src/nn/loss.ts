/**
 * Losses with PyTorch's `reduction` ("mean", "sum", "none"): cross-entropy (with `ignoreIndex` and
 * `labelSmoothing`), binary cross-entropy on logits, mean squared error.
 *
 * Cross-entropy is the fused kernel of src/tensor (every reduction and label smoothing in one
 * native pass); MSE's mean and sum use its fused kernel; binary cross-entropy is composed here.
 * @module
 */

import { mseLoss as fusedMseLoss } from "../tensor/ops/nn.ts";
import { viaF32 } from "../tensor/ops/_half.ts";
import {
  crossEntropy as fusedCrossEntropy,
  type CrossEntropyOptions,
  type Reduction,
} from "../tensor/ops/cross_entropy.ts";
import { formatShape, type Tensor } from "../tensor/tensor.ts";
import { expectFloat, sameShape } from "./_checks.ts";

export type { CrossEntropyOptions, Reduction };

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
  checkReduction("crossEntropy", options.reduction);
  return fusedCrossEntropy(input, target, options);
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
  expectFloat(op, input, target, ...[weight, posWeight].filter((t): t is Tensor => !!t));
  // Half operands compute in f32 and round once; autocast runs this loss in f32 (its fp32 list).
  const half = viaF32(
    op,
    [input, target, weight, posWeight],
    (input, target, weight, posWeight) =>
      binaryCrossEntropyWithLogits(input, target, { reduction, weight, posWeight }),
  );
  if (half) return half;
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
    expectFloat("mseLoss", input, target);
    const half = viaF32("mseLoss", [input, target], (a, b) => mseLoss(a, b, options));
    if (half) return half;
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
