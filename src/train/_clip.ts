/** `--grad-clip`: both trainers' gradient clipping, from the norm each step already measured. @module */

import type { Module } from "../nn/module.ts";
import { noGrad } from "../tensor/autograd.ts";

/**
 * Scales `model`'s gradients to a total norm of `maxNorm` when `norm` (their total, which
 * `checkStep` measured over every rank's shards) is above it, as `clip_grad_norm_` does (the same
 * coefficient, `maxNorm / (norm + 1e-6)`); `maxNorm` 0 is off.
 */
export function clipToNorm(model: Module, maxNorm: number, norm: number): void {
  const coef = maxNorm / (norm + 1e-6);
  if (maxNorm === 0 || coef >= 1) return;
  noGrad(() => {
    for (const p of model.parameters()) p.grad?.mul_(coef);
  });
}
