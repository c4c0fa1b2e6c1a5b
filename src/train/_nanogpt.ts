/**
 * nanoGPT train.py's arithmetic, for iteration-based training: the learning rate of an iteration
 * (`get_lr`). Its model flops utilisation is `GPT.estimateMfu`.
 * @module
 */

import { cosineWithWarmup } from "../optim/lr_scheduler.ts";

/** The settings `get_lr` reads. */
export interface LrSettings {
  /** nanoGPT's learning_rate, the top of the schedule. */
  lr: number;
  warmupIters: number;
  lrDecayIters: number;
  minLr: number;
}

/**
 * nanoGPT's `get_lr(it)`: a linear warmup `lr * (it + 1) / (warmupIters + 1)`, then a cosine decay
 * to `minLr` at `lrDecayIters`, and `minLr` after it (optim.cosineWithWarmup's "nanogpt" warmup).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { getLr } from "./_nanogpt.ts";
 * const s = { lr: 1e-3, warmupIters: 100, lrDecayIters: 5000, minLr: 1e-4 };
 * assert.equal(getLr(0, s), 1e-3 / 101);
 * assert.equal(getLr(5000, s), 1e-4);
 * ```
 */
export function getLr(it: number, s: LrSettings): number {
  return cosineWithWarmup(it, s.lr, {
    warmupSteps: s.warmupIters,
    totalSteps: s.lrDecayIters,
    minLr: s.minLr,
    warmup: "nanogpt",
  });
}
