/**
 * The math methods of a tensor (arithmetic, unary maps, reductions, softmax), as a base class of
 * `Tensor`, like tinygrad's op mixins: `Tensor` stays the surface, and each method forwards to
 * its op family in ops/.
 * @module
 */

import * as elementwise from "./ops/elementwise.ts";
import { matmul } from "./ops/matmul.ts";
import * as nnOps from "./ops/nn.ts";
import * as reduceOps from "./ops/reduce.ts";
import type { Tensor } from "./tensor.ts";
import { TensorIndexing } from "./tensor_indexing.ts";
import { sumInt } from "./ops/compare.ts";

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

  /** Sum of all elements, or over `dim` (i32 for i32 and bool tensors). */
  sum(this: Tensor, dim?: number, keepdim = false): Tensor {
    if (this.dtype !== "f32") return sumInt(this, dim, keepdim); // a count, for i32 and bool
    return reduceOps.sum(this, dim, keepdim);
  }

  /** Mean of all elements, or over `dim`. */
  mean(this: Tensor, dim?: number, keepdim = false): Tensor {
    return reduceOps.mean(this, dim, keepdim);
  }

  /** Indices of the maxima along the last dimension (i32). */
  argmax(this: Tensor, dim = -1): Tensor {
    return reduceOps.argmax(this, dim);
  }

  /** Softmax over the last dimension. */
  softmax(this: Tensor, dim = -1): Tensor {
    return nnOps.softmax(this, dim);
  }

  /** Log-softmax over the last dimension. */
  logSoftmax(this: Tensor, dim = -1): Tensor {
    return nnOps.logSoftmax(this, dim);
  }
}
