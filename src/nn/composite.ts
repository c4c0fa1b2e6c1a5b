/**
 * Layers' functional forms composed from existing tensor ops (no kernel of their own yet): SiLU
 * and RMS normalization. Their intermediates are ordinary tensors: run them inside `tidy` like any
 * other composition. A fused kernel in src/tensor can replace each without changing its callers.
 * @module
 */

import { expectFloat, sameShape } from "./_checks.ts";
import { formatShape, shapeSize, type Tensor } from "../tensor/tensor.ts";
import { viaF32 } from "../tensor/ops/_half.ts";

/** The machine epsilon of float32, PyTorch's `torch.finfo(torch.float32).eps`. */
export const FLOAT32_EPS = 2 ** -23;

/**
 * x * sigmoid(x), PyTorch's `F.silu` (the swish activation of LLaMA-style MLPs).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { F, tensor } from "../../mod.ts";
 * const y = F.silu(tensor([0, 2]));
 * assert.equal(y.toArray()[0], 0);
 * assert.ok(Math.abs(y.toArray()[1] - 2 / (1 + Math.exp(-2))) < 1e-6);
 * ```
 */
export function silu(x: Tensor): Tensor {
  expectFloat("silu", x);
  // A half input computes in f32 and rounds once, as PyTorch's fused kernel.
  const half = viaF32("silu", [x], silu);
  if (half) return half;
  return x.mul(x.sigmoid());
}

/**
 * Root-mean-square normalization over the trailing `normalizedShape` dimensions, PyTorch's
 * `F.rms_norm`: `x / sqrt(mean(x^2) + eps) * weight`.
 *
 * @param x The input, whose shape ends with `normalizedShape`.
 * @param normalizedShape The trailing dimensions to normalize over.
 * @param weight Optional scale of shape `normalizedShape`.
 * @param eps Added to the mean square; null or omitted means float32's machine epsilon, as
 * PyTorch's `eps=None`.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { F, tensor } from "../../mod.ts";
 * const y = F.rmsNorm(tensor([[3, 4]]), [2], null, 0);
 * assert.deepEqual(Array.from(y.toArray(), (v) => Math.round(v * 1e4) / 1e4), [0.8485, 1.1314]);
 * ```
 */
export function rmsNorm(
  x: Tensor,
  normalizedShape: readonly number[],
  weight?: Tensor | null,
  eps?: number | null,
): Tensor {
  expectFloat("rmsNorm", x, ...(weight ? [weight] : []));
  const half = viaF32(
    "rmsNorm",
    [x, weight],
    (x, w) => rmsNorm(x, normalizedShape, w, eps),
    ([x]) => x.dtype,
  );
  if (half) return half;
  const k = normalizedShape.length;
  if (k === 0 || k > x.ndim || !sameShape(x.shape.slice(x.ndim - k), normalizedShape)) {
    throw new RangeError(
      `rmsNorm: normalizedShape ${formatShape(normalizedShape)} does not end input ${
        formatShape(x.shape)
      }`,
    );
  }
  if (weight && !sameShape(weight.shape, normalizedShape)) {
    throw new RangeError(
      `rmsNorm: weight ${formatShape(weight.shape)} does not match ${formatShape(normalizedShape)}`,
    );
  }
  const epsilon = eps ?? FLOAT32_EPS;
  if (!(epsilon >= 0)) throw new RangeError(`rmsNorm: eps must be non-negative, got ${eps}`);
  // Normalize over one flattened trailing dimension: mean() reduces a single dimension.
  const rows = x.reshape([...x.shape.slice(0, x.ndim - k), shapeSize(normalizedShape)]);
  const rms = rows.mul(rows).mean(-1, true).add(epsilon).sqrt();
  const y = rows.div(rms).reshape(x.shape);
  return weight ? y.mul(weight) : y;
}
