/**
 * The built-in layers: Linear, activations, LayerNorm, RMSNorm, Embedding, Dropout, Flatten,
 * Identity. Each prints its settings with PyTorch's `extra_repr` text.
 * @module
 */

import { full, zeros } from "../tensor/creation.ts";
import { gelu, relu } from "../tensor/ops/elementwise.ts";
import { linear } from "../tensor/ops/matmul.ts";
import { dropout, embedding, layerNorm } from "../tensor/ops/nn.ts";
import type { Tensor } from "../tensor/tensor.ts";
import { kaimingUniformLinear, normal, uniform } from "./init.ts";
import { Module } from "./module.ts";
import { Parameter } from "./parameter.ts";
import { rmsNorm, silu } from "./composite.ts";
import { pyBool, pyFloat, pyTuple } from "./_repr.ts";

/** A parameter that takes over a freshly made tensor (disposing the temporary's own reference). */
function ownedParameter(data: Tensor): Parameter {
  const p = new Parameter(data);
  data.dispose();
  return p;
}

function checkPositiveInt(value: number, what: string): void {
  if (!Number.isInteger(value) || value <= 0) {
    throw new RangeError(`${what} must be a positive integer, got ${value}`);
  }
}

/** Options of {@linkcode Linear}. */
export interface LinearOptions {
  /** Whether to learn an additive bias (default true). */
  bias?: boolean;
}

/**
 * y = x W^T + b with weight [outFeatures, inFeatures] and PyTorch's default initialisation.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { nn, randn } from "../../mod.ts";
 * const fc = new nn.Linear(784, 10);
 * assert.deepEqual(fc.forward(randn([64, 784])).shape, [64, 10]);
 * ```
 */
export class Linear extends Module {
  /** [outFeatures, inFeatures]. */
  weight: Parameter;
  /** [outFeatures], or null without bias. */
  bias: Parameter | null;

  /**
   * Creates a `Linear`.
   *
   * @param inFeatures Size of each input sample.
   * @param outFeatures Size of each output sample.
   * @param options See {@linkcode LinearOptions}.
   */
  constructor(
    readonly inFeatures: number,
    readonly outFeatures: number,
    options: LinearOptions = {},
  ) {
    super();
    checkPositiveInt(inFeatures, "Linear: inFeatures");
    checkPositiveInt(outFeatures, "Linear: outFeatures");
    this.weight = ownedParameter(kaimingUniformLinear([outFeatures, inFeatures]));
    this.bias = options.bias ?? true
      ? ownedParameter(uniform([outFeatures], 1 / Math.sqrt(inFeatures)))
      : null;
  }

  /** Applies the layer to x [*, inFeatures]. */
  forward(x: Tensor): Tensor {
    return linear(x, this.weight, this.bias);
  }

  /** `in_features=784, out_features=512, bias=True`. */
  override extraRepr(): string {
    return `in_features=${this.inFeatures}, out_features=${this.outFeatures}, bias=${
      pyBool(this.bias !== null)
    }`;
  }
}

/** max(x, 0) as a module. */
export class ReLU extends Module {
  /** Applies ReLU. */
  forward(x: Tensor): Tensor {
    return relu(x);
  }
}

/** x * sigmoid(x) as a module (PyTorch's `nn.SiLU`). */
export class SiLU extends Module {
  /** Applies SiLU. */
  forward(x: Tensor): Tensor {
    return silu(x);
  }
}

/** Returns its input unchanged (PyTorch's `nn.Identity`): a placeholder where a layer is optional. */
export class Identity extends Module {
  /** Returns x itself. */
  forward<T>(x: T): T {
    return x;
  }
}

/** GELU as a module: exact, or `{ approximate: "tanh" }`. */
export class GELU extends Module {
  /** "none" (erf form) or "tanh". */
  readonly approximate: "none" | "tanh";
  /**
   * Creates a `GELU`.
   *
   * @param options The approximation, as in PyTorch.
   */
  constructor(options: { approximate?: "none" | "tanh" } = {}) {
    super();
    this.approximate = options.approximate ?? "none";
  }
  /** Applies GELU. */
  forward(x: Tensor): Tensor {
    return gelu(x, this.approximate);
  }

  /** `approximate='none'`. */
  override extraRepr(): string {
    return `approximate='${this.approximate}'`;
  }
}

/** Layer normalization over the trailing `normalizedShape` dimensions, with learnable affine terms. */
export class LayerNorm extends Module {
  /** The normalized trailing shape. */
  readonly normalizedShape: readonly number[];
  /** Added to the variance for stability. */
  readonly eps: number;
  /** Scale, ones at start (null without elementwise affine). */
  weight: Parameter | null;
  /** Shift, zeros at start (null without bias). */
  bias: Parameter | null;

  /**
   * Creates a `LayerNorm`.
   *
   * @param normalizedShape The trailing dimensions to normalize (a number for one).
   * @param options eps (1e-5), elementwiseAffine (true), bias (true).
   */
  constructor(
    normalizedShape: number | readonly number[],
    options: { eps?: number; elementwiseAffine?: boolean; bias?: boolean } = {},
  ) {
    super();
    this.normalizedShape = typeof normalizedShape === "number"
      ? [normalizedShape]
      : [...normalizedShape];
    this.normalizedShape.forEach((d) => checkPositiveInt(d, "LayerNorm: normalizedShape"));
    this.eps = options.eps ?? 1e-5;
    const affine = options.elementwiseAffine ?? true;
    this.weight = affine ? ownedParameter(full(this.normalizedShape, 1)) : null;
    this.bias = affine && (options.bias ?? true)
      ? ownedParameter(zeros(this.normalizedShape))
      : null;
  }

  /** Normalizes x. */
  forward(x: Tensor): Tensor {
    return layerNorm(x, this.normalizedShape, this.weight, this.bias, this.eps);
  }

  /** `(64,), eps=1e-05, elementwise_affine=True, bias=True`. */
  override extraRepr(): string {
    const affine = normRepr(this.normalizedShape, this.eps, this.weight !== null);
    return `${affine}, bias=${pyBool(this.bias !== null)}`;
  }
}

function normRepr(shape: readonly number[], eps: number | null, affine: boolean): string {
  return `${pyTuple(shape)}, eps=${eps === null ? "None" : pyFloat(eps)}, elementwise_affine=${
    pyBool(affine)
  }`;
}

/**
 * Root-mean-square normalization over the trailing `normalizedShape` dimensions with a learnable
 * scale (PyTorch's `nn.RMSNorm`): `x / sqrt(mean(x^2) + eps) * weight`.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { nn, randn } from "../../mod.ts";
 * const norm = new nn.RMSNorm(64);
 * assert.deepEqual(norm.forward(randn([2, 5, 64])).shape, [2, 5, 64]);
 * assert.equal(String(norm), "RMSNorm((64,), eps=None, elementwise_affine=True)");
 * ```
 */
export class RMSNorm extends Module {
  /** The normalized trailing shape. */
  readonly normalizedShape: readonly number[];
  /** Added to the mean square; null means float32's machine epsilon (PyTorch's `eps=None`). */
  readonly eps: number | null;
  /** Scale, ones at start (null without elementwise affine). */
  weight: Parameter | null;

  /**
   * Creates a `RMSNorm`.
   *
   * @param normalizedShape The trailing dimensions to normalize (a number for one).
   * @param options eps (null: float32's machine epsilon), elementwiseAffine (true).
   */
  constructor(
    normalizedShape: number | readonly number[],
    options: { eps?: number | null; elementwiseAffine?: boolean } = {},
  ) {
    super();
    this.normalizedShape = typeof normalizedShape === "number"
      ? [normalizedShape]
      : [...normalizedShape];
    this.normalizedShape.forEach((d) => checkPositiveInt(d, "RMSNorm: normalizedShape"));
    this.eps = options.eps ?? null;
    if (this.eps !== null && !(this.eps >= 0)) {
      throw new RangeError(`RMSNorm: eps must be non-negative, got ${this.eps}`);
    }
    this.weight = options.elementwiseAffine ?? true
      ? ownedParameter(full(this.normalizedShape, 1))
      : null;
  }

  /** Normalizes x. */
  forward(x: Tensor): Tensor {
    return rmsNorm(x, this.normalizedShape, this.weight, this.eps);
  }

  /** `(64,), eps=None, elementwise_affine=True`. */
  override extraRepr(): string {
    return normRepr(this.normalizedShape, this.eps, this.weight !== null);
  }
}

/** A lookup table of `numEmbeddings` vectors of `embeddingDim`, initialised from N(0, 1). */
export class Embedding extends Module {
  /** [numEmbeddings, embeddingDim]. */
  weight: Parameter;
  /**
   * Creates a `Embedding`.
   *
   * @param numEmbeddings Size of the table.
   * @param embeddingDim Size of each vector.
   */
  constructor(readonly numEmbeddings: number, readonly embeddingDim: number) {
    super();
    checkPositiveInt(numEmbeddings, "Embedding: numEmbeddings");
    checkPositiveInt(embeddingDim, "Embedding: embeddingDim");
    this.weight = ownedParameter(normal([numEmbeddings, embeddingDim]));
  }
  /** Looks up i32 indices of any shape. */
  forward(indices: Tensor): Tensor {
    return embedding(indices, this.weight);
  }

  /** `1000, 64`. */
  override extraRepr(): string {
    return `${this.numEmbeddings}, ${this.embeddingDim}`;
  }
}

/** Dropout with probability `p` in training mode, the identity in evaluation mode. */
export class Dropout extends Module {
  /**
   * Creates a `Dropout`.
   *
   * @param p Probability of zeroing an element (default 0.5).
   */
  constructor(readonly p: number = 0.5) {
    super();
    if (!(p >= 0 && p <= 1)) throw new RangeError(`Dropout: probability ${p} is outside [0, 1]`);
  }
  /** Applies dropout when training. */
  forward(x: Tensor): Tensor {
    return dropout(x, this.p, this.training);
  }

  /** `p=0.5, inplace=False`. */
  override extraRepr(): string {
    return `p=${pyFloat(this.p)}, inplace=False`;
  }
}

/** Flattens dimensions `startDim`..`endDim` (default 1..-1, keeping the batch dimension). */
export class Flatten extends Module {
  /**
   * Creates a `Flatten`.
   *
   * @param startDim First dimension to flatten (default 1).
   * @param endDim Last dimension to flatten (default -1).
   */
  constructor(readonly startDim: number = 1, readonly endDim: number = -1) {
    super();
  }
  /** Flattens x. */
  forward(x: Tensor): Tensor {
    return x.flatten(this.startDim, this.endDim);
  }

  /** `start_dim=1, end_dim=-1`. */
  override extraRepr(): string {
    return `start_dim=${this.startDim}, end_dim=${this.endDim}`;
  }
}
