/**
 * Grad mode: whether ops record themselves for autograd (PyTorch's `torch.no_grad()`), in a file
 * of its own so that the in-place ops and the autograd engine both read it.
 * @module
 */

let gradEnabled = true;

/** Whether operations are being recorded (false inside `noGrad`). */
export function isGradEnabled(): boolean {
  return gradEnabled;
}

/**
 * Runs `fn` without recording operations for autograd (PyTorch's `torch.no_grad()`).
 *
 * @example Evaluation without a graph
 * ```ts
 * import assert from "node:assert/strict";
 * import { noGrad, tensor } from "../../mod.ts";
 * const w = tensor([1, 2], [2], { requiresGrad: true });
 * const y = noGrad(() => w.mul(2));
 * assert.deepStrictEqual(y.requiresGrad, false);
 * ```
 */
export function noGrad<R>(fn: () => R): R {
  const previous = gradEnabled;
  gradEnabled = false;
  try {
    return fn();
  } finally {
    gradEnabled = previous;
  }
}
