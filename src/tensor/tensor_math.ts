/**
 * The math methods of a tensor (arithmetic, unary maps, reductions, softmax), as a base class of
 * `Tensor`, like tinygrad's op mixins: `Tensor` stays the surface, and each method forwards to
 * its op family in ops/.
 * @module
 */

import * as elementwise from "./ops/elementwise.ts";
import { matmul } from "./ops/matmul.ts";
import * as nnOps from "./ops/nn.ts";
import * as orderOps from "./ops/order.ts";
import * as reduceOps from "./ops/reduce.ts";
import type { Tensor } from "./tensor.ts";
import { TensorIndexing } from "./tensor_indexing.ts";
import { sumInt } from "./ops/compare.ts";
import { isFloat } from "./dtype.ts";

/** The math methods `Tensor` inherits; each takes the tensor as `this`. */
export abstract class TensorMath extends TensorIndexing {
  /** this + other, broadcasting. */
  add(this: Tensor, other: Tensor | number): Tensor {
    return elementwise.add(this, other);
  }

  /** this - other, broadcasting. */
  sub(this: Tensor, other: Tensor | number): Tensor {
    return elementwise.sub(this, other);
  }

  /** this * other, broadcasting. */
  mul(this: Tensor, other: Tensor | number): Tensor {
    return elementwise.mul(this, other);
  }

  /** this / other, broadcasting. */
  div(this: Tensor, other: Tensor | number): Tensor {
    return elementwise.div(this, other);
  }

  /** Matrix product (see `matmul`). */
  matmul(this: Tensor, other: Tensor): Tensor {
    return matmul(this, other);
  }

  /** max(x, 0). */
  relu(this: Tensor): Tensor {
    return elementwise.relu(this);
  }

  /** GELU (exact by default, or approximate "tanh"). */
  gelu(this: Tensor, approximate: "none" | "tanh" = "none"): Tensor {
    return elementwise.gelu(this, approximate);
  }

  /** e^x. */
  exp(this: Tensor): Tensor {
    return elementwise.exp(this);
  }

  /** Natural logarithm. */
  log(this: Tensor): Tensor {
    return elementwise.log(this);
  }

  /** Hyperbolic tangent. */
  tanh(this: Tensor): Tensor {
    return elementwise.tanh(this);
  }

  /** Logistic sigmoid. */
  sigmoid(this: Tensor): Tensor {
    return elementwise.sigmoid(this);
  }

  /** -x. */
  neg(this: Tensor): Tensor {
    return elementwise.neg(this);
  }

  /** Square root. */
  sqrt(this: Tensor): Tensor {
    return elementwise.sqrt(this);
  }

  /** x ** exponent. */
  pow(this: Tensor, exponent: number): Tensor {
    return elementwise.pow(this, exponent);
  }

  /**
   * Sum of all elements, or over `dim` (one dimension or several; see `sum`). i32 and bool
   * tensors sum to i32 (a count for bool).
   */
  sum(this: Tensor, dim?: number | readonly number[] | null, keepdim = false): Tensor {
    if (!isFloat(this.dtype)) {
      if (dim === null || dim === undefined || typeof dim === "number") {
        return sumInt(this, dim ?? undefined, keepdim);
      }
      // Highest dimension first, so that the lower ones keep their index without keepdim.
      const [first, ...rest] = dim.map((d) => (d < 0 ? d + this.ndim : d)).sort((a, b) => b - a);
      let out = sumInt(this, first, keepdim);
      for (const d of rest) out = sumInt(out, d, keepdim);
      return out;
    }
    return reduceOps.sum(this, dim, keepdim);
  }

  /** Mean of all elements, or over `dim` (one dimension or several; see `mean`). */
  mean(this: Tensor, dim?: number | readonly number[] | null, keepdim = false): Tensor {
    return reduceOps.mean(this, dim, keepdim);
  }

  /** Variance over `dim` (all when absent), `correction` 1 by default (see `variance`). */
  var(
    this: Tensor,
    dim?: number | readonly number[] | null,
    options?: reduceOps.VarianceOptions,
  ): Tensor {
    return reduceOps.variance(this, dim, options);
  }

  /** Standard deviation over `dim` (all when absent), `correction` 1 by default (see `std`). */
  std(
    this: Tensor,
    dim?: number | readonly number[] | null,
    options?: reduceOps.VarianceOptions,
  ): Tensor {
    return reduceOps.std(this, dim, options);
  }

  /** Indices (i32) of the maxima along `dim` (the last by default; see `argmax`). */
  argmax(this: Tensor, dim = -1, keepdim = false): Tensor {
    return reduceOps.argmax(this, dim, keepdim);
  }

  /** Softmax over `dim` (the last by default). */
  softmax(this: Tensor, dim = -1): Tensor {
    return nnOps.softmax(this, dim);
  }

  /** Log-softmax over `dim` (the last by default). */
  logSoftmax(this: Tensor, dim = -1): Tensor {
    return nnOps.logSoftmax(this, dim);
  }

  // ---- order ops (ops/order.ts) ----

  /** Elements limited to [min, max] (either bound may be null; see `clamp`). */
  clamp(this: Tensor, min?: number | null, max?: number | null): Tensor {
    return orderOps.clamp(this, min, max);
  }

  /** |x|. */
  abs(this: Tensor): Tensor {
    return orderOps.abs(this);
  }

  /** The elementwise maximum with `other`, broadcasting (see `maximum`). */
  maximum(this: Tensor, other: Tensor): Tensor {
    return orderOps.maximum(this, other);
  }

  /** The elementwise minimum with `other`, broadcasting (see `minimum`). */
  minimum(this: Tensor, other: Tensor): Tensor {
    return orderOps.minimum(this, other);
  }

  /** The largest element (see `max`). */
  max(this: Tensor): Tensor;
  /** The largest elements along `dim` and their indices (see `max`). */
  max(this: Tensor, dim: number, keepdim?: boolean): orderOps.ValuesIndices;
  max(this: Tensor, dim?: number, keepdim = false): Tensor | orderOps.ValuesIndices {
    return dim === undefined ? orderOps.max(this) : orderOps.max(this, dim, keepdim);
  }

  /** The smallest element (see `min`). */
  min(this: Tensor): Tensor;
  /** The smallest elements along `dim` and their indices (see `min`). */
  min(this: Tensor, dim: number, keepdim?: boolean): orderOps.ValuesIndices;
  min(this: Tensor, dim?: number, keepdim = false): Tensor | orderOps.ValuesIndices {
    return dim === undefined ? orderOps.min(this) : orderOps.min(this, dim, keepdim);
  }
}
