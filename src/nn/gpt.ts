/**
 * `nn.GPT`: a GPT-2 style language model after nanoGPT's `model.py`, module for module: the same
 * names (`transformer.wte`, `transformer.h.0.attn.c_attn`, `lm_head`, ...), the same
 * initialisation (N(0, 0.02), residual projections scaled by 1/sqrt(2·nLayer)), exact GELU, the
 * token embedding tied to the output head, and the same numbers, so a nanoGPT state dict loads
 * unchanged and `stateDict()` gives its keys back.
 * @module
 */

import { arange } from "../tensor/creation.ts";
import { A100_BF16_PEAK_FLOPS as A100_PEAK } from "../tensor/device/mod.ts";
import { noGrad } from "../tensor/autograd.ts";
import { crossEntropy } from "../tensor/ops/cross_entropy.ts";
import type { Tensor } from "../tensor/tensor.ts";
import { AdamW } from "../optim/adamw.ts";
import { type GPTConfig, GPTTransformer, type PretrainedOverrides } from "./gpt_blocks.ts";
import { loadPretrained, readPretrainedConfig } from "./gpt_pretrained.ts";
import { generateTokens } from "./_generate.ts";
import type { KVCache } from "./kv_cache.ts";
import { normal } from "./init.ts";
import { Embedding, Linear } from "./layers.ts";
import { Module } from "./module.ts";
import { Parameter } from "./parameter.ts";

export * from "./gpt_blocks.ts";
export * from "./kv_cache.ts";

type Resolved = Required<GPTConfig>;

/** Overwrites a parameter with N(mean, std²) samples. */
function initNormal(p: Parameter, std: number): void {
  using sample = normal(p.shape, 0, std);
  noGrad(() => p.copy_(sample));
}

/** Options of {@linkcode GPT.generate}. */
export interface GenerateOptions {
  /** Divides the logits before sampling (default 1). */
  temperature?: number;
  /** Samples only among the k most likely tokens (default: all). */
  topK?: number;
}

function checkConfig(config: GPTConfig): Resolved {
  const resolved: Resolved = { dropout: 0, bias: true, ...config };
  for (const key of ["vocabSize", "blockSize", "nLayer", "nHead", "nEmbd"] as const) {
    const value = resolved[key];
    if (!Number.isInteger(value) || value <= 0) {
      throw new RangeError(`GPT: ${key} must be a positive integer, got ${value}`);
    }
  }
  if (resolved.nEmbd % resolved.nHead !== 0) {
    throw new RangeError(
      `GPT: nEmbd ${resolved.nEmbd} is not divisible by nHead ${resolved.nHead}`,
    );
  }
  if (!(resolved.dropout >= 0 && resolved.dropout < 1)) {
    throw new RangeError(`GPT: dropout must be in [0, 1), got ${resolved.dropout}`);
  }
  return resolved;
}

/** What {@linkcode GPT.forward} returns: nanoGPT's `(logits, loss)`. */
export interface GPTOutput {
  /** [B, T, vocabSize] with targets; without, the last position's only: [B, 1, vocabSize]. */
  logits: Tensor;
  /** The mean cross-entropy over the targets that are not -1, or null without targets. */
  loss: Tensor | null;
}

/**
 * A GPT's loss from its logits [B, T, vocabSize] (under tensor parallelism with a
 * vocabulary-parallel loss, this rank's [B, T, vocabSize / tp]) and targets [B, T].
 */
export type GPTLoss = (logits: Tensor, targets: Tensor) => Tensor;

const lossOverrides = new WeakMap<GPT, GPTLoss>();

/**
 * Makes `model.forward(idx, targets)` compute its loss with `loss` (tensor parallelism's
 * vocabulary-parallel cross-entropy) instead of `crossEntropy` over the whole logits.
 * @ignore dtrain-internal (its module is re-exported with `export *`)
 */
export function setGPTLoss(model: GPT, loss: GPTLoss): void {
  lossOverrides.set(model, loss);
}

/** An A100's bf16 dense peak in FLOP/s (312 T), the unit of nanoGPT's `estimate_mfu`. */
export const A100_BF16_PEAK_FLOPS: number = A100_PEAK;

/**
 * A GPT language model (nanoGPT's `GPT`): `forward(idx, targets)` maps i32 tokens [B, T] to
 * logits [B, T, vocabSize] and the loss; `forward(idx)` to the last position's logits only.
 *
 * @example A tiny model's logits, its loss and its nanoGPT parameter names
 * ```ts
 * import assert from "node:assert/strict";
 * import { nn, tensor } from "../../mod.ts";
 * const gpt = new nn.GPT({ vocabSize: 16, blockSize: 8, nLayer: 2, nHead: 2, nEmbd: 8 });
 * const idx = tensor([1, 2, 3, 4, 5, 6], [2, 3], { dtype: "i32" });
 * const targets = tensor([2, 3, 4, 5, 6, -1], [2, 3], { dtype: "i32" }); // -1: not scored
 * const { logits, loss } = gpt.forward(idx, targets);
 * assert.deepStrictEqual(logits.shape, [2, 3, 16]);
 * assert.ok(loss.item() > 0);
 * assert.deepStrictEqual(gpt.forward(idx).logits.shape, [2, 1, 16]);
 * const keys = Object.keys(gpt.stateDict());
 * assert.ok(keys.includes("transformer.h.1.attn.c_attn.weight"));
 * assert.ok(keys.includes("lm_head.weight") && keys.includes("transformer.wte.weight"));
 * ```
 */
export class GPT extends Module {
  #config: Readonly<Resolved>;
  /** Embeddings, blocks and the final norm. */
  transformer: GPTTransformer;
  /** The output head: nEmbd → vocabSize, no bias, its weight shared with `transformer.wte`. */
  lm_head: Linear;

  /**
   * Builds the module's layers.
   *
   * @param config The model's shape.
   */
  constructor(config: GPTConfig) {
    super();
    const resolved = checkConfig(config);
    this.#config = Object.freeze(resolved);
    this.transformer = new GPTTransformer(resolved);
    this.lm_head = new Linear(resolved.nEmbd, resolved.vocabSize, { bias: false });
    this.transformer.wte.weight.dispose();
    this.transformer.wte.weight = this.lm_head.weight;
    for (const m of this.modules()) {
      if (m instanceof Linear) {
        initNormal(m.weight, 0.02);
        if (m.bias) noGrad(() => m.bias!.zero_());
      } else if (m instanceof Embedding) {
        initNormal(m.weight, 0.02);
      }
    }
    for (const [name, p] of this.namedParameters()) {
      if (name.endsWith("c_proj.weight")) initNormal(p, 0.02 / Math.sqrt(2 * resolved.nLayer));
    }
  }

  /**
   * The resolved configuration, read-only (frozen); only {@linkcode GPT.cropBlockSize} changes
   * it, to a new object with the smaller `blockSize`.
   */
  get config(): Readonly<Resolved> {
    return this.#config;
  }

  /**
   * A GPT-2 checkpoint in Hugging Face's layout, as nanoGPT's `from_pretrained` loads it, from
   * the local folder `dir`: `config.json` (`n_layer`, `n_head`, `n_embd`, `vocab_size`,
   * `n_positions`, which becomes `blockSize`; biases on, dropout 0 unless overridden) and
   * `model.safetensors` (F32; names with or without `transformer.`). The Conv1D weights
   * (`attn.c_attn`, `attn.c_proj`, `mlp.c_fc`, `mlp.c_proj`), stored [in, out], are transposed;
   * the `attn.bias` and `attn.masked_bias` buffers are skipped; `lm_head` is tied to `wte`.
   *
   * @param dir The folder holding `config.json` and `model.safetensors`.
   * @param overrides Only `dropout` may be overridden, as in nanoGPT.
   * @returns The model, on cpu, in training mode.
   * @throws CheckpointError naming the file and the key for a missing file, an unsupported or
   *   missing config value, or a tensor that is missing, unexpected, misshapen or not F32.
   * @throws RangeError for an override other than `dropout`.
   */
  static fromPretrained(dir: string, overrides: PretrainedOverrides = {}): GPT {
    const model = new GPT(readPretrainedConfig(dir, overrides));
    loadPretrained(dir, model);
    return model;
  }

  /**
   * The number of parameters (the tied embedding once); without the position embeddings unless
   * `nonEmbedding` is false, as nanoGPT's `get_num_params`.
   */
  numParams(nonEmbedding = true): number {
    const total = this.parameters().reduce((n, p) => n + p.numel(), 0);
    return nonEmbedding ? total - this.transformer.wpe.weight.numel() : total;
  }

  /**
   * nanoGPT's forward. idx: i32 tokens [B, T] with T <= blockSize. With `targets` (i32 [B, T],
   * -1 where a position is not scored): the logits [B, T, vocabSize] and their mean
   * cross-entropy (`ignoreIndex: -1`). Without: only the last position goes through `lm_head`
   * (nanoGPT's inference-time saving), logits [B, 1, vocabSize], and `loss` null. With a
   * `cache` (under `noGrad`, dropout off), idx holds the positions after the `cache.length`
   * cached ones, which they attend over too and which they join (see {@linkcode KVCache}).
   */
  forward(idx: Tensor, targets: Tensor, cache?: KVCache): { logits: Tensor; loss: Tensor };
  /** Without targets: the last position's logits [B, 1, vocabSize], and a null loss. */
  forward(idx: Tensor, targets?: null, cache?: KVCache): { logits: Tensor; loss: null };
  /** With targets or without (see the first signature). */
  forward(idx: Tensor, targets?: Tensor | null, cache?: KVCache): GPTOutput;
  forward(idx: Tensor, targets?: Tensor | null, cache?: KVCache): GPTOutput {
    if (idx.dtype !== "i32" || idx.ndim !== 2) {
      throw new TypeError(`GPT: expected i32 tokens [B, T], got ${idx.dtype} [${idx.shape}]`);
    }
    const t = idx.shape[1], block = this.config.blockSize;
    if (cache && cache.layers.length !== this.transformer.h.length) {
      throw new RangeError(
        `GPT: a KVCache of ${cache.layers.length} layers for ${this.transformer.h.length} blocks`,
      );
    }
    const start = cache?.length ?? 0;
    if (start + t > block) {
      throw new RangeError(
        start === 0
          ? `GPT: cannot forward a sequence of length ${t}, block size is only ${block}`
          : `GPT: cannot forward ${t} positions after ${start} cached ones, block size is only ${block}`,
      );
    }
    if (targets && (targets.dtype !== "i32" || `${targets.shape}` !== `${idx.shape}`)) {
      throw new TypeError(
        `GPT: expected i32 targets [${idx.shape}] as idx, got ${targets.dtype} [${targets.shape}]`,
      );
    }
    const tr = this.transformer;
    // On the embeddings' device: positions made on cpu would not index a model elsewhere.
    const pos = arange(start, start + t, 1, { dtype: "i32", device: tr.wpe.weight.device });
    let x = tr.drop.forward(tr.wte.forward(idx).add(tr.wpe.forward(pos)));
    let layer = 0;
    for (const block of tr.h) x = block.forward(x, cache?.layers[layer++]);
    x = tr.ln_f.forward(x);
    if (!targets) return { logits: this.lm_head.forward(x.narrow(1, t - 1, 1)), loss: null };
    const logits = this.lm_head.forward(x);
    const override = lossOverrides.get(this);
    if (override) return { logits, loss: override(logits, targets) };
    const v = this.config.vocabSize;
    const loss = crossEntropy(logits.reshape([-1, v]), targets.reshape([-1]), { ignoreIndex: -1 });
    return { logits, loss };
  }

  /**
   * nanoGPT's `configure_optimizers`: AdamW over two parameter groups, the trainable tensors of
   * 2 or more dimensions (matmul weights, embeddings) with `weightDecay`, the rest (biases, norms)
   * with none. `log`, if given, receives nanoGPT's two lines on the groups' sizes.
   *
   * @param weightDecay The decay of the first group.
   * @param learningRate Both groups' `lr`.
   * @param betas AdamW's coefficients.
   * @param log Where the group sizes go (default: nowhere).
   * @returns The optimizer; `paramGroups[0]` decays, `paramGroups[1]` does not.
   */
  configureOptimizers(
    weightDecay: number,
    learningRate: number,
    betas: [number, number],
    log?: (line: string) => void,
  ): AdamW {
    const params = this.parameters().filter((p) => p.requiresGrad);
    const decay = params.filter((p) => p.ndim >= 2), noDecay = params.filter((p) => p.ndim < 2);
    const count = (ps: Parameter[]) =>
      ps.reduce((n, p) => n + p.numel(), 0).toLocaleString("en-US");
    log?.(`num decayed parameter tensors: ${decay.length}, with ${count(decay)} parameters`);
    log?.(
      `num non-decayed parameter tensors: ${noDecay.length}, with ${count(noDecay)} parameters`,
    );
    return new AdamW([
      { params: decay, weightDecay },
      { params: noDecay, weightDecay: 0 },
    ], { lr: learningRate, betas });
  }

  /**
   * nanoGPT's `estimate_mfu`: model flops utilisation as a fraction of `peakFlops` (by default an
   * A100's bf16 peak, 312 TFLOPS, as nanoGPT), counting 6N + 12·L·H·Q·T flops per token (PaLM,
   * appendix B) over blockSize tokens per forward-backward.
   *
   * @param fwdbwdPerIter Forward-backward passes per iteration (batch size × accumulation steps).
   * @param dt Seconds per iteration.
   * @param numParams The parameters counted (default `numParams()`: nanoGPT's). A fully sharded
   *   GPT's parameters are this rank's shards, so a caller passes the whole model's, counted
   *   before sharding.
   * @param peakFlops The FLOP/s that count as 100% (the train job's: this machine's, on a CPU).
   */
  estimateMfu(
    fwdbwdPerIter: number,
    dt: number,
    numParams: number = this.numParams(),
    peakFlops: number = A100_BF16_PEAK_FLOPS,
  ): number {
    const n = numParams;
    const { nLayer: l, nHead: h, nEmbd, blockSize: t } = this.config;
    const q = Math.floor(nEmbd / h);
    const flopsPerToken = 6 * n + 12 * l * h * q * t;
    const flopsPerIter = flopsPerToken * t * fwdbwdPerIter;
    return flopsPerIter * (1 / dt) / peakFlops;
  }

  /**
   * nanoGPT's `crop_block_size`: shortens the model's context to `blockSize` (e.g. a GPT-2
   * checkpoint's 1024 to fit a small job) by keeping the first rows of the position embeddings,
   * as a new parameter (build the optimizer afterwards). As in nanoGPT, `transformer.wpe`'s
   * `numEmbeddings` keeps the size it was built with. The attention has no mask buffer to crop
   * (its kernel is causal by construction).
   *
   * @param blockSize The new block size, at most the current one.
   * @throws RangeError for a size that is not an integer in [1, config.blockSize].
   */
  cropBlockSize(blockSize: number): void {
    const current = this.config.blockSize;
    if (!Number.isInteger(blockSize) || blockSize < 1 || blockSize > current) {
      throw new RangeError(
        `cropBlockSize: block size must be an integer in [1, ${current}], got ${blockSize}`,
      );
    }
    const wpe = this.transformer.wpe, old = wpe.weight;
    const rows = noGrad(() => old.narrow(0, 0, blockSize).clone());
    wpe.weight = new Parameter(rows, old.requiresGrad);
    rows.dispose();
    old.dispose();
    this.#config = Object.freeze({ ...this.#config, blockSize });
  }

  /**
   * Continues each row of `idx` [B, T] by `maxNewTokens` tokens, sampling each from the model's
   * distribution at the last position (cropped to the block size), like nanoGPT's `generate`.
   * Uses dtrain's random generator (`manualSeed` makes it repeatable). Call `eval()` first to turn
   * dropout off. `idx` is on the model's device, and so are the tokens returned. While the
   * sequence fits the block, each step reads only the new token and attends over the keys and
   * values kept from before (a {@linkcode KVCache}); the tokens are those of nanoGPT's full
   * forwards under the same seed (see [Note: cached generation samples nanoGPT's tokens]).
   */
  generate(idx: Tensor, maxNewTokens: number, options: GenerateOptions = {}): Tensor {
    return generateTokens(this, idx, maxNewTokens, options);
  }
}
