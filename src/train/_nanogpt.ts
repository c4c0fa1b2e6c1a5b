/**
 * nanoGPT train.py's arithmetic, for iteration-based training: the learning rate of an iteration
 * (`get_lr`) and the model flops utilisation (`estimate_mfu`).
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

/** The model's sizes `estimate_mfu` reads. */
export interface MfuShape {
  /** Parameters without the position embeddings (nanoGPT's `get_num_params()`). */
  params: number;
  nLayer: number;
  nHead: number;
  nEmbd: number;
  blockSize: number;
}

/**
 * nanoGPT's `estimate_mfu(fwdbwd_per_iter, dt)` (GPT.estimateMfu) from the whole model's sizes,
 * which a fully sharded GPT's parameters (each rank's shards) no longer give: the flops of `fwdbwdPerIter` sequences forward
 * and backward (the PaLM paper's 6N + 12·L·H·Q·T per token) per second, as a fraction of an A100's
 * bfloat16 peak of 312 TFLOPS (nanoGPT's yardstick, kept so the numbers compare).
 */
export function estimateMfu(shape: MfuShape, fwdbwdPerIter: number, dtSeconds: number): number {
  const { params, nLayer: l, nHead: h, nEmbd, blockSize: t } = shape;
  const flopsPerToken = 6 * params + 12 * l * h * (nEmbd / h) * t;
  const flopsPerIter = flopsPerToken * t * fwdbwdPerIter;
  return flopsPerIter / dtSeconds / 312e12;
}
