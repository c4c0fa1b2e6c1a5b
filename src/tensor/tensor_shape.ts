/**
 * The shape methods of a tensor (reshape, view, transpose, narrow, split, expand, ...), as a base
 * class of `Tensor` like tensor_math.ts's: each forwards to ops/shape.ts or ops/slice.ts and
 * returns a view where the layout allows.
 * @module
 */

import type { DType } from "./dtype.ts";
import * as shapeOps from "./ops/shape.ts";
import * as sliceOps from "./ops/slice.ts";
import { viewDType } from "./ops/views.ts";
import type { Tensor } from "./tensor.ts";
import { TensorHost } from "./tensor_host.ts";

/** The shape methods `Tensor` inherits; each takes the tensor as `this`. */
export abstract class TensorShape extends TensorHost {
  /** The same elements in a new shape (one dimension may be -1); a view when possible. */
  reshape(this: Tensor, ...shape: number[] | [readonly number[]]): Tensor {
    const dims = (Array.isArray(shape[0]) ? shape[0] : shape) as readonly number[];
    return shapeOps.reshape(this, dims);
  }

  /**
   * The same memory in a new shape (one dimension may be -1). Like PyTorch's `view`, it never
   * copies: a tensor whose layout cannot be viewed so (a transposed one) throws; use `reshape`.
   */
  view(this: Tensor, ...shape: number[] | [readonly number[]]): Tensor;
  /** The same memory read as a dtype of the same size, e.g. u16 bits as bf16 (see `viewDType`). */
  view(this: Tensor, dtype: DType): Tensor;
  view(this: Tensor, ...args: number[] | [readonly number[]] | [DType]): Tensor {
    if (typeof args[0] === "string") return viewDType(this, args[0]);
    return shapeOps.view(this, (Array.isArray(args[0]) ? args[0] : args) as readonly number[]);
  }

  /** Flattens dimensions `startDim`..`endDim` into one. */
  flatten(this: Tensor, startDim = 0, endDim = -1): Tensor {
    return shapeOps.flatten(this, startDim, endDim);
  }

  /** A view with two dimensions swapped. */
  transpose(this: Tensor, dim0: number, dim1: number): Tensor {
    return shapeOps.transpose(this, dim0, dim1);
  }

  /** The transpose of a 2-d tensor (a view). */
  t(this: Tensor): Tensor {
    return shapeOps.t(this);
  }

  /** The transpose of a 2-d tensor (PyTorch's `.T`). */
  get T(): Tensor {
    return (this as unknown as Tensor).t();
  }

  /** Elements `start` to `start + length - 1` along `dim` (a view; see `narrow`). */
  narrow(this: Tensor, dim: number, start: number, length: number): Tensor {
    return sliceOps.narrow(this, dim, start, length);
  }

  /** The slice at `index` along `dim`, that dimension removed (a view; see `select`). */
  select(this: Tensor, dim: number, index: number): Tensor {
    return sliceOps.select(this, dim, index);
  }

  /** Views of `splitSize` elements along `dim`, or of the given sizes (see `split`). */
  split(this: Tensor, splitSizeOrSections: number | readonly number[], dim = 0): Tensor[] {
    return sliceOps.split(this, splitSizeOrSections, dim);
  }

  /** `chunks` views of equal size along `dim` (see `chunk`). */
  chunk(this: Tensor, chunks: number, dim = 0): Tensor[] {
    return sliceOps.chunk(this, chunks, dim);
  }

  /** A broadcast view to `shape`. */
  expand(this: Tensor, ...shape: number[]): Tensor {
    return shapeOps.expand(this, shape);
  }
}
