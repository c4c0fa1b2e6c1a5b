/**
 * nanoGPT train.py's arithmetic, for iteration-based training: the learning rate of an iteration
 * (`get_lr`) and the model flops utilisation (`estimate_mfu`).
 * @module
 */

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
 * to `minLr` at `lrDecayIters`, and `minLr` after it.
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
  if (it < s.warmupIters) return s.lr * (it + 1) / (s.warmupIters + 1);
  if (it > s.lrDecayIters) return s.minLr;
  const decayRatio = (it - s.warmupIters) / (s.lrDecayIters - s.warmupIters);
  const coeff = 0.5 * (1 + Math.cos(Math.PI * decayRatio));
  return s.minLr + coeff * (s.lr - s.minLr);
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
 * nanoGPT's `estimate_mfu(fwdbwd_per_iter, dt)`: the flops of `fwdbwdPerIter` sequences forward
 * and backward (the PaLM paper's 6N + 12·L·H·Q·T per token) per second, as a fraction of an A100's
 * bfloat16 peak of 312 TFLOPS (nanoGPT's yardstick, kept so the numbers compare).
 */
export function estimateMfu(shape: MfuShape, fwdbwdPerIter: number, dtSeconds: number): number {
  const { params, nLayer: l, nHead: h, nEmbd, blockSize: t } = shape;
  const flopsPerToken = 6 * params + 12 * l * h * (nEmbd / h) * t;
  const flopsPerIter = flopsPerToken * t * fwdbwdPerIter;
  return flopsPerIter / dtSeconds / 312e12;
}
