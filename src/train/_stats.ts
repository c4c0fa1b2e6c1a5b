/**
 * Numbers the trainer reads off a model (its gradient norm, a checksum of its state) and sums over
 * the ranks.
 * @module
 */

import { allReduce } from "../dist/mod.ts";
import type { Module } from "../nn/module.ts";
import { tensor } from "../tensor/creation.ts";
import { noGrad } from "../tensor/autograd.ts";
import { tidy } from "../tensor/scope.ts";

/** The sum of squares of all of `model`'s local gradients. */
function gradSquareSum(model: Module): number {
  let sum = 0;
  for (const p of model.parameters()) {
    if (p.grad !== null) sum += tidy(() => noGrad(() => p.grad!.mul(p.grad!).sum().item()));
  }
  return sum;
}

/**
 * The L2 norm of all of `model`'s gradients together (PyTorch's `clip_grad_norm_` total). A fully
 * sharded model's rank holds some rows of every gradient: pass `sharded`, and every rank calls it,
 * as their squares add up over the ranks.
 */
export async function gradNorm(model: Module, sharded = false, worldSize = 1): Promise<number> {
  const squares = gradSquareSum(model);
  return Math.sqrt(sharded ? (await sumOverRanks([squares], worldSize))[0] : squares);
}

/** Each value summed over the `worldSize` ranks (every rank calls it with as many). */
export async function sumOverRanks(values: number[], worldSize: number): Promise<number[]> {
  if (worldSize === 1) return values;
  const t = tensor(values);
  try {
    await allReduce(t, "sum");
    return Array.from(t.toArray());
  } finally {
    t.dispose();
  }
}

/** FNV-1a over `words` (bytes or 32-bit words), going on from `hash`. */
export function fnv1a(words: ArrayLike<number>, hash = 0x811c9dc5): number {
  for (let i = 0; i < words.length; i++) hash = Math.imul(hash ^ words[i], 0x01000193);
  return hash;
}

/** FNV-1a over the bits of every tensor in `model`'s state dict: equal models, equal sums. */
export function stateChecksum(model: Module): number {
  let hash = 0x811c9dc5;
  for (const t of Object.values(model.stateDict())) {
    const values = t.toArray();
    hash = fnv1a(new Uint32Array(values.buffer, values.byteOffset, values.length), hash);
  }
  return hash | 0;
}
