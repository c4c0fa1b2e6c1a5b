/**
 * The modules inside `nn.GPT`, after nanoGPT's `model.py` (`CausalSelfAttention`, `MLP`, `Block`
 * and the `transformer` ModuleDict), the configuration, and what `fromPretrained` may override.
 * @module
 */

import { packedCausalAttention } from "../tensor/ops/attention.ts";
import type { Tensor } from "../tensor/tensor.ts";
import { ModuleDict, ModuleList } from "./container.ts";
import type { LayerKVCache } from "./kv_cache.ts";
import { Dropout, Embedding, GELU, LayerNorm, Linear } from "./layers.ts";
import { Module } from "./module.ts";

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

/** What `GPT.fromPretrained` may change in a checkpoint's configuration. */
export interface PretrainedOverrides {
  /** Dropout while training (a checkpoint's is 0 here, as nanoGPT sets it). */
  dropout?: number;
}

type Resolved = Required<GPTConfig>;

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
  readonly #headSize: number;

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
    this.#headSize = config.nEmbd / config.nHead;
  }

  /** Features per head (nEmbd / nHead): a tensor-parallel plan must keep each rank's heads whole. */
  get headSize(): number {
    return this.#headSize;
  }

  /**
   * x [B, T, C] → [B, T, C]: nanoGPT's split into q, k, v, heads moved forward, causal
   * `scaled_dot_product_attention` and heads merged back, as one fused op that reads the heads in
   * place in `c_attn`'s output (the same numbers, without the copies). The head count is read
   * from `c_attn`'s weight, so that under tensor parallelism (each rank holding its heads' q, k
   * and v rows) each rank attends over its own heads. With `cache`, x holds the positions after
   * the cached ones, which it attends over too, and which it joins (see `KVCache`).
   */
  forward(x: Tensor, cache?: LayerKVCache): Tensor {
    const dropoutP = this.training ? this.attn_dropout.p : 0;
    const heads = this.c_attn.weight.shape[0] / (3 * this.#headSize);
    if (cache && dropoutP > 0) {
      throw new Error("CausalSelfAttention: a KVCache needs attention dropout off (call eval())");
    }
    const qkv = this.c_attn.forward(x);
    const y = cache ? cache.attend(qkv, heads) : packedCausalAttention(qkv, heads, dropoutP);
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

  /** x + attn(ln_1(x)), then + mlp(ln_2(x)); `cache` is the attention's (see `KVCache`). */
  forward(x: Tensor, cache?: LayerKVCache): Tensor {
    const h = x.add(this.attn.forward(this.ln_1.forward(x), cache));
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
