/**
 * `GPT.generate`'s loop: nanoGPT's sampling (temperature, top k, one multinomial draw per row and
 * step), with the context's keys and values cached while the sequence fits the block.
 * @module
 */

import { rand, tensor } from "../tensor/creation.ts";
import { noGrad } from "../tensor/grad_mode.ts";
import { tidy } from "../tensor/scope.ts";
import type { Tensor } from "../tensor/tensor.ts";
import type { GenerateOptions, GPT } from "./gpt.ts";
import { KVCache } from "./kv_cache.ts";
import { Dropout } from "./layers.ts";

/**
 * Continues each row of `idx` [B, T] by `maxNewTokens` sampled tokens (see `GPT.generate`).
 *
 * [Note: cached generation samples nanoGPT's tokens]
 * nanoGPT runs a full forward over the last blockSize tokens for each new token. While the
 * sequence fits the block, the positions of the tokens already read do not change, so their keys
 * and values are kept (a KVCache) and each step reads only the new token; the logits agree with
 * the full forward's to rounding. Once the sequence passes the block, nanoGPT crops it to the
 * last blockSize tokens, which shifts every position, so from then on each step is a full forward
 * over the cropped window, as nanoGPT's. The random draws are the same calls in the same order
 * (one `rand([B])` per step, after the forward), so a seed gives nanoGPT's sequence either way.
 * A model that draws dropout masks in its forward (training mode, p > 0) is not cached: its
 * masks over the whole context are redrawn each step.
 */
export function generateTokens(
  model: GPT,
  idx: Tensor,
  maxNewTokens: number,
  options: GenerateOptions,
): Tensor {
  const temperature = options.temperature ?? 1;
  if (!(temperature > 0)) {
    throw new RangeError(`generate: temperature must be positive, got ${temperature}`);
  }
  const topK = options.topK;
  if (topK !== undefined && !(Number.isInteger(topK) && topK > 0)) {
    throw new RangeError(`generate: topK must be a positive integer, got ${topK}`);
  }
  if (idx.dtype !== "i32" || idx.ndim !== 2) {
    throw new TypeError(`generate: expected i32 tokens [B, T], got ${idx.dtype} [${idx.shape}]`);
  }
  const [b, t0] = idx.shape;
  const { vocabSize: v, blockSize: block, nLayer } = model.config;
  const rows = Array.from({ length: b }, () => [] as number[]);
  const start = idx.toArray();
  for (let r = 0; r < b; r++) rows[r].push(...start.subarray(r * t0, (r + 1) * t0));
  const drawsMasks = model.modules().some((m) => m instanceof Dropout && m.training && m.p > 0);
  let cache = drawsMasks ? null : new KVCache(nLayer, block);
  try {
    noGrad(() => {
      for (let step = 0; step < maxNewTokens; step++) {
        const length = t0 + step;
        if (cache && length > block) {
          cache.dispose();
          cache = null;
        }
        const from = cache ? cache.length : Math.max(0, length - block);
        const [logits, uniforms] = tidy(() => {
          const context = rows.flatMap((row) => row.slice(from));
          const tokens = tensor(context, [b, length - from], { dtype: "i32", device: idx.device });
          // A bf16 or f16 model's logits are read as f32.
          const last = model.forward(tokens, null, cache ?? undefined).logits.select(1, -1);
          return [last.to("f32").toArray() as Float32Array, rand([b]).toArray()];
        });
        for (let r = 0; r < b; r++) {
          rows[r].push(sample(logits.subarray(r * v, (r + 1) * v), temperature, topK, uniforms[r]));
        }
      }
    });
  } finally {
    cache?.dispose();
  }
  return tensor(rows.flat(), [b, t0 + maxNewTokens], { dtype: "i32", device: idx.device });
}

/** Draws an index from softmax(logits / temperature) restricted to the top k, by inverse CDF. */
function sample(
  logits: Float32Array,
  temperature: number,
  topK: number | undefined,
  u: number,
): number {
  const scaled = Array.from(logits, (x) => x / temperature);
  if (topK !== undefined && topK < scaled.length) {
    const kth = [...scaled].sort((a, b) => b - a)[topK - 1];
    for (let i = 0; i < scaled.length; i++) if (scaled[i] < kth) scaled[i] = -Infinity;
  }
  const max = Math.max(...scaled);
  const weights = scaled.map((x) => Math.exp(x - max));
  const total = weights.reduce((a, b) => a + b, 0);
  let acc = 0;
  for (let i = 0; i < weights.length; i++) {
    acc += weights[i] / total;
    if (u < acc) return i;
  }
  return weights.findLastIndex((w) => w > 0);
}
