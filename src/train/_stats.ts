/**
 * Numbers the trainer reads off a model (a checksum of its state) and sums over the ranks.
 * @module
 */

import { allReduce } from "../distributed/mod.ts";
import type { Module } from "../nn/module.ts";
import { tensor } from "../tensor/creation.ts";

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
