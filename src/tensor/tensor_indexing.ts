/**
 * The comparison, indexing, view and in-place methods of a tensor, as a base class of
 * `TensorMath` (tinygrad-style op mixins): each method forwards to its op family in ops/
 * (compare.ts, indexing.ts, views.ts, integer.ts, inplace_math.ts) or to repr.ts.
 * @module
 */

import * as compareOps from "./ops/compare.ts";
import * as indexing from "./ops/indexing.ts";
import * as inplaceMath from "./ops/inplace_math.ts";
import { floorDivide } from "./ops/integer.ts";
import * as views from "./ops/views.ts";
import { repr } from "./repr.ts";
import type { Tensor } from "./tensor.ts";

/** The methods `Tensor` inherits through `TensorMath`; each takes the tensor as `this`. */
export abstract class TensorIndexing {
  /** this == other elementwise (bool), broadcasting; other a tensor or a number. */
  eq(this: Tensor, other: Tensor | number): Tensor {
    return compareOps.compare("eq", this, other);
  }

  /** this != other elementwise (bool), broadcasting. */
  ne(this: Tensor, other: Tensor | number): Tensor {
    return compareOps.compare("ne", this, other);
  }

  /** this < other elementwise (bool), broadcasting. */
  lt(this: Tensor, other: Tensor | number): Tensor {
    return compareOps.compare("lt", this, other);
  }

  /** this <= other elementwise (bool), broadcasting. */
  le(this: Tensor, other: Tensor | number): Tensor {
    return compareOps.compare("le", this, other);
  }

  /** this > other elementwise (bool), broadcasting. */
  gt(this: Tensor, other: Tensor | number): Tensor {
    return compareOps.compare("gt", this, other);
  }

  /** this >= other elementwise (bool), broadcasting. */
  ge(this: Tensor, other: Tensor | number): Tensor {
    return compareOps.compare("ge", this, other);
  }

  /** Floor division of i32 tensors (PyTorch's `floor_divide`, `//`). */
  floorDivide(this: Tensor, other: Tensor | number): Tensor {
    return floorDivide(this, other);
  }

  /** A copy as f32 (PyTorch's `.float()`). */
  float(this: Tensor): Tensor {
    return this.to("f32");
  }

  /** A copy as bf16 (PyTorch's `.bfloat16()`). */
  bfloat16(this: Tensor): Tensor {
    return this.to("bf16");
  }

  /** A copy as f16 (PyTorch's `.half()`). */
  half(this: Tensor): Tensor {
    return this.to("f16");
  }

  /** A copy as i32 (PyTorch's `.int()`). */
  int(this: Tensor): Tensor {
    return this.to("i32");
  }

  /** A copy as bool: non-zero is true (PyTorch's `.bool()`). */
  bool(this: Tensor): Tensor {
    return this.to("bool");
  }

  /** `value` where the bool `mask` is true (see `maskedFill`). */
  maskedFill(this: Tensor, mask: Tensor, value: number): Tensor {
    return indexing.maskedFill(this, mask, value);
  }

  /** The slices along `dim` at the i32 `index` positions (see `indexSelect`). */
  indexSelect(this: Tensor, dim: number, index: Tensor): Tensor {
    return indexing.indexSelect(this, dim, index);
  }

  /** Values picked along `dim` by an i32 `index` (see `gather`). */
  gather(this: Tensor, dim: number, index: Tensor): Tensor {
    return indexing.gather(this, dim, index);
  }

  /** Drops size-1 dimensions: all, or those in `dim` (a view). */
  squeeze(this: Tensor, dim?: number | readonly number[]): Tensor {
    return views.squeeze(this, dim);
  }

  /** Inserts a size-1 dimension at `dim` (a view). */
  unsqueeze(this: Tensor, dim: number): Tensor {
    return views.unsqueeze(this, dim);
  }

  /** Reorders the dimensions (a view): `x.permute(0, 2, 1)` or `x.permute([0, 2, 1])`. */
  permute(this: Tensor, ...dims: number[] | [readonly number[]]): Tensor {
    return views.permute(this, (Array.isArray(dims[0]) ? dims[0] : dims) as readonly number[]);
  }

  /** The lower triangle of the last two dimensions, the rest zero. */
  tril(this: Tensor, diagonal = 0): Tensor {
    return views.tril(this, diagonal);
  }

  /** The upper triangle of the last two dimensions, the rest zero. */
  triu(this: Tensor, diagonal = 0): Tensor {
    return views.triu(this, diagonal);
  }

  /** this -= alpha * other in place (other broadcast to this shape, or a number). */
  sub_(this: Tensor, other: Tensor | number, alpha = 1): Tensor {
    inplaceMath.arith("sub", this, other, alpha);
    return this;
  }

  /** this /= other in place (f32; other broadcast to this shape, or a number). */
  div_(this: Tensor, other: Tensor | number): Tensor {
    inplaceMath.arith("div", this, other);
    return this;
  }

  /** Clamps into [min, max] in place (f32; either bound may be left out). */
  clamp_(this: Tensor, min?: number, max?: number): Tensor {
    inplaceMath.clamp(this, min, max);
    return this;
  }

  /** What `console.log(t)` prints: PyTorch's repr (see repr.ts). */
  [Symbol.for("Deno.customInspect")](this: Tensor): string {
    return repr(this);
  }
}
