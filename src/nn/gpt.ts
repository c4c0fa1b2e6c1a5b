/**
 * `nn.GPT`: a GPT-2 style language model after nanoGPT's `model.py`, module for module: the same
 * names (`transformer.wte`, `transformer.h.0.attn.c_attn`, `lm_head`, ...), the same
 * initialisation (N(0, 0.02), residual projections scaled by 1/sqrt(2·nLayer)), exact GELU, the
 * token embedding tied to the output head, and the same numbers, so a nanoGPT state dict loads
 * unchanged and `stateDict()` gives its keys back.
 * @module
 */

import { arange, rand, tensor } from "../tensor/creation.ts";
import { noGrad } from "../tensor/autograd.ts";
import { packedCausalAttention } from "../tensor/ops/attention.ts";
import type { Tensor } from "../tensor/tensor.ts";
import { ModuleDict, ModuleList } from "./container.ts";
import { normal } from "./init.ts";
import { Dropout, Embedding, GELU, LayerNorm, Linear } from "./layers.ts";
import { Module } from "./module.ts";
import type { Parameter } from "./parameter.ts";

/** The model's shape (nanoGPT's `GPTConfig`, camelCase). */
export interface GPTConfig {
  /** Tokens in the vocabulary. */
  vocabSize: number;
  /** The longest sequence the model reads (the position table's size). */
  blockSize: number;
  /** Transformer blocks. */
  nLayer: number;
  /** Attention heads per block; divides `nEmbd`. */
  nHead: number;
  /** Embedding width. */
  nEmbd: number;
  /** Dropout probability while training (default 0). */
  dropout?: number;
  /** Biases in the Linear and LayerNorm layers, like GPT-2 (default true). */
  bias?: boolean;
}

type Resolved = Required<GPTConfig>;

/** Overwrites a parameter with N(mean, std²) samples. */
function initNormal(p: Parameter, std: number): void {
  using sample = normal(p.shape, 0, std);
  noGrad(() => p.copy_(sample));
}

/** Multi-head causal self-attention with the heads' projections fused in one Linear. */
export class CausalSelfAttention extends Module {
  /** q, k and v for all heads: nEmbd → 3·nEmbd. */
  c_attn: Linear;
  /** The output projection: nEmbd → nEmbd. */
  c_proj: Linear;
  /** Dropout on the attention weights (applied inside the fused kernel). */
  attn_dropout: Dropout;
  /** Dropout after the output projection. */
  resid_dropout: Dropout;
  readonly #nHead: number;

  /**
   * Builds the module's layers.
   *
   * @param config The model's shape.
   */
  constructor(config: Resolved) {
    super();
    this.c_attn = new Linear(config.nEmbd, 3 * config.nEmbd, { bias: config.bias });
    this.c_proj = new Linear(config.nEmbd, config.nEmbd, { bias: config.bias });
    this.attn_dropout = new Dropout(config.dropout);
    this.resid_dropout = new Dropout(config.dropout);
    this.#nHead = config.nHead;
  }

  /**
   * x [B, T, C] → [B, T, C]: nanoGPT's split into q, k, v, heads moved forward, causal
   * `scaled_dot_product_attention` and heads merged back, as one fused op that reads the heads in
   * place in `c_attn`'s output (the same numbers, without the copies).
   */
  forward(x: Tensor): Tensor {
    const dropoutP = this.training ? this.attn_dropout.p : 0;
    const y = packedCausalAttention(this.c_attn.forward(x), this.#nHead, dropoutP);
    return this.resid_dropout.forward(this.c_proj.forward(y));
  }
}

/** The feed-forward part of a block: Linear, exact GELU, Linear, dropout. */
export class MLPBlock extends Module {
  /** nEmbd → 4·nEmbd. */
  c_fc: Linear;
  /** Exact (erf) GELU. */
  gelu: GELU;
  /** 4·nEmbd → nEmbd. */
  c_proj: Linear;
  /** Dropout on the output. */
  dropout: Dropout;

  /**
   * Builds the module's layers.
   *
   * @param config The model's shape.
   */
  constructor(config: Resolved) {
    super();
    this.c_fc = new Linear(config.nEmbd, 4 * config.nEmbd, { bias: config.bias });
    this.gelu = new GELU();
    this.c_proj = new Linear(4 * config.nEmbd, config.nEmbd, { bias: config.bias });
    this.dropout = new Dropout(config.dropout);
  }

  /** x [B, T, C] → [B, T, C]. */
  forward(x: Tensor): Tensor {
    return this.dropout.forward(this.c_proj.forward(this.gelu.forward(this.c_fc.forward(x))));
  }
}

/** One transformer block with pre-norm residual connections. */
export class Block extends Module {
  /** The norm before attention. */
  ln_1: LayerNorm;
  /** Causal self-attention. */
  attn: CausalSelfAttention;
  /** The norm before the MLP. */
  ln_2: LayerNorm;
  /** The feed-forward part. */
  mlp: MLPBlock;

  /**
   * Builds the module's layers.
   *
   * @param config The model's shape.
   */
  constructor(config: Resolved) {
    super();
    this.ln_1 = new LayerNorm(config.nEmbd, { bias: config.bias });
    this.attn = new CausalSelfAttention(config);
    this.ln_2 = new LayerNorm(config.nEmbd, { bias: config.bias });
    this.mlp = new MLPBlock(config);
  }

  /** x + attn(ln_1(x)), then + mlp(ln_2(x)). */
  forward(x: Tensor): Tensor {
    const h = x.add(this.attn.forward(this.ln_1.forward(x)));
    return h.add(this.mlp.forward(this.ln_2.forward(h)));
  }
}

/** nanoGPT's `transformer` ModuleDict, with typed access to its entries. */
export class GPTTransformer extends ModuleDict {
  /**
   * Builds the module's layers.
   *
   * @param config The model's shape.
   */
  constructor(config: Resolved) {
    super({
      wte: new Embedding(config.vocabSize, config.nEmbd),
      wpe: new Embedding(config.blockSize, config.nEmbd),
      drop: new Dropout(config.dropout),
      h: new ModuleList(Array.from({ length: config.nLayer }, () => new Block(config))),
      ln_f: new LayerNorm(config.nEmbd, { bias: config.bias }),
    });
  }
  /** Token embeddings [vocabSize, nEmbd] (the same tensor as `lm_head.weight`). */
  get wte(): Embedding {
    return this.get("wte") as Embedding;
  }
  /** Position embeddings [blockSize, nEmbd]. */
  get wpe(): Embedding {
    return this.get("wpe") as Embedding;
  }
  /** Dropout on the summed embeddings. */
  get drop(): Dropout {
    return this.get("drop") as Dropout;
  }
  /** The blocks. */
  get h(): ModuleList<Block> {
    return this.get("h") as ModuleList<Block>;
  }
  /** The final norm. */
  get ln_f(): LayerNorm {
    return this.get("ln_f") as LayerNorm;
  }
}

// They print as nanoGPT's modules do (`(transformer): ModuleDict(`, `(mlp): MLP(`).
Object.defineProperty(GPTTransformer, "name", { value: "ModuleDict" });
Object.defineProperty(MLPBlock, "name", { value: "MLP" });

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

/**
 * A GPT language model (nanoGPT's `GPT`): `forward(idx)` maps i32 tokens [B, T] to logits
 * [B, T, vocabSize].
 *
 * @example A tiny model's logits and its nanoGPT parameter names
 * ```ts
 * import assert from "node:assert/strict";
 * import { nn, tensor } from "../../mod.ts";
 * const gpt = new nn.GPT({ vocabSize: 16, blockSize: 8, nLayer: 2, nHead: 2, nEmbd: 8 });
 * const logits = gpt.forward(tensor([1, 2, 3, 4, 5, 6], [2, 3], { dtype: "i32" }));
 * assert.deepStrictEqual(logits.shape, [2, 3, 16]);
 * const keys = Object.keys(gpt.stateDict());
 * assert.ok(keys.includes("transformer.h.1.attn.c_attn.weight"));
 * assert.ok(keys.includes("lm_head.weight") && keys.includes("transformer.wte.weight"));
 * ```
 */
export class GPT extends Module {
  /** The resolved configuration. */
  readonly config: Readonly<Resolved>;
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
    this.config = resolved;
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
   * The number of parameters (the tied embedding once); without the position embeddings unless
   * `nonEmbedding` is false, as nanoGPT's `get_num_params`.
   */
  numParams(nonEmbedding = true): number {
    const total = this.parameters().reduce((n, p) => n + p.numel(), 0);
    return nonEmbedding ? total - this.transformer.wpe.weight.numel() : total;
  }

  /** idx: i32 tokens [B, T] with T <= blockSize → logits [B, T, vocabSize]. */
  forward(idx: Tensor): Tensor {
    if (idx.dtype !== "i32" || idx.ndim !== 2) {
      throw new TypeError(`GPT: expected i32 tokens [B, T], got ${idx.dtype} [${idx.shape}]`);
    }
    const t = idx.shape[1];
    if (t > this.config.blockSize) {
      throw new RangeError(
        `GPT: cannot forward a sequence of length ${t}, block size is only ${this.config.blockSize}`,
      );
    }
    const tr = this.transformer;
    // On the embeddings' device: positions made on cpu would not index a model elsewhere.
    const pos = arange(0, t, 1, { dtype: "i32", device: tr.wpe.weight.device });
    let x = tr.drop.forward(tr.wte.forward(idx).add(tr.wpe.forward(pos)));
    for (const block of tr.h) x = block.forward(x);
    return this.lm_head.forward(tr.ln_f.forward(x));
  }

  /**
   * Continues each row of `idx` [B, T] by `maxNewTokens` tokens, sampling each from the model's
   * distribution at the last position (cropped to the block size), like nanoGPT's `generate`.
   * Uses dtrain's random generator (`manualSeed` makes it repeatable). Call `eval()` first to turn
   * dropout off. `idx` is on the model's device, and so are the tokens returned.
   */
  generate(idx: Tensor, maxNewTokens: number, options: GenerateOptions = {}): Tensor {
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
    const v = this.config.vocabSize, block = this.config.blockSize;
    const rows = Array.from({ length: b }, () => [] as number[]);
    const start = idx.toArray();
    for (let r = 0; r < b; r++) rows[r].push(...start.subarray(r * t0, (r + 1) * t0));
    noGrad(() => {
      for (let step = 0; step < maxNewTokens; step++) {
        const context = rows.flatMap((row) => row.slice(-block));
        const t = context.length / b;
        const tokens = tensor(context, [b, t], { dtype: "i32", device: idx.device });
        const logits = this.forward(tokens).select(1, -1).toArray() as Float32Array;
        const uniforms = rand([b]).toArray();
        for (let r = 0; r < b; r++) {
          rows[r].push(sample(logits.subarray(r * v, (r + 1) * v), temperature, topK, uniforms[r]));
        }
      }
    });
    return tensor(rows.flat(), [b, t0 + maxNewTokens], { dtype: "i32", device: idx.device });
  }
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
