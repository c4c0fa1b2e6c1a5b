/**
 * Cross-entropy of bf16 or f16 logits as PyTorch computes it: `log_softmax` in the logits' dtype
 * (its output rounded once), then `nll_loss` in f32 on those log-probabilities, the loss rounded
 * to the logits' dtype (or left f32 under autocast, whose fp32 list has nll_loss).
 * @module
 */

import type { Tensor } from "../tensor.ts";
import type { CrossEntropyOptions } from "./cross_entropy.ts";
import { viaF32 } from "./_half.ts";
import { ne } from "./compare.ts";
import { add, div, mul, neg } from "./elementwise.ts";
import { gather, where } from "./indexing.ts";
import { logSoftmax } from "./nn.ts";
import { sum } from "./reduce.ts";
import { reshape, to } from "./shape.ts";

/**
 * PyTorch's `nll_loss` (with cross_entropy's label smoothing) of f32 log-probabilities [N, C]
 * against i32 targets [N], from the differentiable ops.
 */
function nllLoss(logp: Tensor, target: Tensor, options: Required<CrossEntropyOptions>): Tensor {
  const { ignoreIndex, reduction, labelSmoothing } = options;
  const [rows, cols] = logp.shape;
  const valid = ne(target, ignoreIndex);
  const safe = where(valid, target, 0);
  const weight = to(valid, "f32");
  const picked = reshape(gather(logp, 1, reshape(safe, [rows, 1])), [rows]);
  let losses = neg(mul(picked, weight));
  if (labelSmoothing > 0) {
    const smooth = neg(mul(sum(logp, 1), weight));
    losses = add(mul(losses, 1 - labelSmoothing), mul(smooth, labelSmoothing / cols));
  }
  if (reduction === "none") return losses;
  const total = sum(losses);
  return reduction === "sum" ? total : div(total, sum(weight));
}

/** crossEntropy for half logits [N, C] (checked by the caller). */
export function halfCrossEntropy(
  logits: Tensor,
  target: Tensor,
  options: Required<CrossEntropyOptions>,
): Tensor {
  const logp = logSoftmax(logits, 1);
  const out = viaF32("nllLoss", [logp], (x) => nllLoss(x, target, options))!;
  if (out.gradFn === null) logp.dispose();
  return out;
}
