/** Numbers the trainer reads off a model: its gradient norm and a checksum of its state. @module */

import type { Module } from "../nn/module.ts";
import { noGrad } from "../tensor/autograd.ts";
import { tidy } from "../tensor/scope.ts";

/** The L2 norm of all of `model`'s gradients together (PyTorch's `clip_grad_norm_` total). */
export function gradNorm(model: Module): number {
  let sum = 0;
  for (const p of model.parameters()) {
    if (p.grad !== null) sum += tidy(() => noGrad(() => p.grad!.mul(p.grad!).sum().item()));
  }
  return Math.sqrt(sum);
}

/** FNV-1a over the bits of every tensor in `model`'s state dict: equal models, equal sums. */
export function stateChecksum(model: Module): number {
  let hash = 0x811c9dc5;
  for (const t of Object.values(model.stateDict())) {
    const values = t.toArray();
    const bits = new Uint32Array(values.buffer, values.byteOffset, values.length);
    for (let i = 0; i < bits.length; i++) hash = Math.imul(hash ^ bits[i], 0x01000193);
  }
  return hash | 0;
}
