/**
 * `nn.KVCache`: the keys and values of a GPT's past positions, kept between forwards so that
 * decoding one more token costs one position's work instead of the whole context's (Hugging
 * Face's `past_key_values`). `GPT.generate` uses one; `GPT.forward(idx, null, cache)` takes one.
 * @module
 */

import { tensor } from "../tensor/creation.ts";
import { isGradEnabled } from "../tensor/grad_mode.ts";
import { packedCausalAttention, scaledDotProductAttention } from "../tensor/ops/attention.ts";
import { keep } from "../tensor/scope.ts";
import type { Tensor } from "../tensor/tensor.ts";

/**
 * One attention layer's cache: the rows of its fused q, k, v projection (`c_attn`'s output) for
 * the positions seen so far, and causal attention of new positions over all of them.
 */
export class LayerKVCache {
  /**
   * [capacity, B, 3C]: time outermost, so that the rows a forward appends are one contiguous block
   * (an in-place copy needs a contiguous destination). The queries ride along with the keys and
   * values: one copy per step instead of two, for a third more memory.
   */
  #rows: Tensor | null = null;
  #length = 0;
  readonly #capacity: number;

  /**
   * An empty cache.
   *
   * @param capacity The most positions it holds (the model's block size).
   */
  constructor(capacity: number) {
    this.#capacity = capacity;
  }

  /** Positions cached. */
  get length(): number {
    return this.#length;
  }

  /**
   * Appends `qkv` [B, T, 3C] (q, k and v side by side, each `nHead` heads wide, as `c_attn` makes
   * them) at positions `length` .. `length + T - 1` and returns the new queries' causal attention
   * over every cached position, heads side by side: [B, T, C]. On an empty cache this is
   * `packedCausalAttention(qkv, nHead)` itself, so a prompt's pass gives the uncached numbers.
   *
   * @throws RangeError when the positions would pass the capacity, or the batch or width differ
   *   from what the cache holds.
   * @throws Error while gradients are enabled: the cache is for inference, its rows are copies
   *   that gradients would not flow through.
   */
  attend(qkv: Tensor, nHead: number): Tensor {
    if (isGradEnabled()) {
      throw new Error("KVCache: use the cache under noGrad (inference only)");
    }
    const [b, t, c3] = qkv.shape;
    const start = this.#length, end = start + t;
    if (end > this.#capacity) {
      throw new RangeError(
        `KVCache: cannot add ${t} positions to ${start}, the capacity is ${this.#capacity}`,
      );
    }
    const rows = this.#rows ??= keep(qkv.newEmpty([this.#capacity, b, c3]));
    if (rows.shape[1] !== b || rows.shape[2] !== c3 || rows.dtype !== qkv.dtype) {
      throw new RangeError(
        `KVCache: holds ${rows.dtype} rows of [B ${rows.shape[1]}, 3C ${rows.shape[2]}], got ` +
          `${qkv.dtype} [${qkv.shape}]`,
      );
    }
    rows.narrow(0, start, t).copy_(qkv.transpose(0, 1));
    this.#length = end;
    if (start === 0) return packedCausalAttention(qkv, nHead);
    const c = c3 / 3, hs = c / nHead;
    // [..., T or L, C] → [B, nHead, T or L, hs]: views into qkv and the cache, no copies.
    const heads = (x: Tensor, timeDim: number) => {
      const split = x.view([...x.shape.slice(0, 2), nHead, hs]);
      return timeDim === 0 ? split.transpose(0, 1).transpose(1, 2) : split.transpose(1, 2);
    };
    const past = rows.narrow(0, 0, end);
    const q = heads(qkv.narrow(2, 0, c), 1);
    const k = heads(past.narrow(2, c, c), 0), v = heads(past.narrow(2, 2 * c, c), 0);
    // A single query sees every cached position; several see them up to their own.
    const attnMask = t === 1 ? null : tensor(
      Float32Array.from(
        { length: t * end },
        (_, i) => i % end > start + Math.floor(i / end) ? -Infinity : 0,
      ),
      [t, end],
      { device: qkv.device },
    );
    const y = scaledDotProductAttention(q, k, v, { attnMask });
    return y.transpose(1, 2).reshape([b, t, c]);
  }

  /** Frees the cached rows; the cache is empty again. */
  dispose(): void {
    this.#rows?.dispose();
    this.#rows = null;
    this.#length = 0;
  }
}

/**
 * A GPT's cache for incremental decoding: one {@linkcode LayerKVCache} per block. Pass it to
 * `GPT.forward(idx, null, cache)` under `noGrad`: the first forward reads the prompt from
 * position 0, each later one continues at position `cache.length`, attending over the cached
 * positions. The positions never pass `capacity` (the block size): past it, a GPT's absolute
 * position embeddings shift, and the context must be read again from scratch.
 *
 * @example The last position's logits, from a cache or from the whole sequence
 * ```ts
 * import assert from "node:assert/strict";
 * import { nn, noGrad, tensor } from "../../mod.ts";
 * const gpt = new nn.GPT({ vocabSize: 16, blockSize: 8, nLayer: 2, nHead: 2, nEmbd: 8 }).eval();
 * const ids = [3, 1, 4, 1, 5];
 * const whole = gpt.forward(tensor(ids, [1, 5], { dtype: "i32" })).logits.toArray();
 * using cache = new nn.KVCache(2, 8);
 * const stepped = noGrad(() => {
 *   gpt.forward(tensor(ids.slice(0, 4), [1, 4], { dtype: "i32" }), null, cache);
 *   return gpt.forward(tensor([5], [1, 1], { dtype: "i32" }), null, cache).logits.toArray();
 * });
 * assert.equal(cache.length, 5);
 * stepped.forEach((x, i) => assert.ok(Math.abs(x - whole[i]) < 1e-5));
 * ```
 */
export class KVCache {
  /** One cache per transformer block, in order. */
  readonly layers: readonly LayerKVCache[];

  /**
   * An empty cache.
   *
   * @param nLayer The model's blocks.
   * @param capacity The most positions it holds (the model's block size).
   */
  constructor(nLayer: number, capacity: number) {
    for (const [name, value] of [["nLayer", nLayer], ["capacity", capacity]] as const) {
      if (!Number.isInteger(value) || value <= 0) {
        throw new RangeError(`KVCache: ${name} must be a positive integer, got ${value}`);
      }
    }
    this.layers = Array.from({ length: nLayer }, () => new LayerKVCache(capacity));
  }

  /**
   * Positions cached: where the next forward's tokens start.
   * @throws Error when the layers disagree (a forward that failed part-way).
   */
  get length(): number {
    const lengths = new Set(this.layers.map((layer) => layer.length));
    if (lengths.size > 1) {
      throw new Error(
        `KVCache: the layers hold ${[...lengths].join(", ")} positions (a forward failed ` +
          "part-way); dispose the cache and start again",
      );
    }
    return this.layers[0].length;
  }

  /** Frees every layer's rows; the cache is empty again. */
  dispose(): void {
    for (const layer of this.layers) layer.dispose();
  }

  /** `using cache = new KVCache(...)` frees it at the end of the scope. */
  [Symbol.dispose](): void {
    this.dispose();
  }
}
