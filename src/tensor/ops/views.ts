/**
 * Views that only change shape and strides (`squeeze`, `unsqueeze`, `permute`: no copy, like
 * PyTorch's), and the triangle masks `tril`/`triu`.
 * @module
 */

import { record } from "../autograd.ts";
import { contiguousStrides, formatShape, normalizeDim, shapeSize } from "../layout.ts";
import { refuseStorageOnly } from "../dtype.ts";
import type { Tensor } from "../tensor.ts";
import { emptyOn, temporaries } from "./_util.ts";
import { contiguous } from "./shape.ts";
import { viaF32 } from "./_half.ts";

/** A view of `t` with `shape`/`strides`, whose gradient is `gy` viewed back in `t`'s shape. */
function reshapedView(t: Tensor, name: string, shape: number[], strides: number[]): Tensor {
  return record(
    t.alias(shape, strides),
    name,
    [t],
    (gy) => [gy.alias(t.shape, contiguousStrides(t.shape))],
    [],
    [],
  );
}

/**
 * `t` without its size-1 dimensions: all of them, or those in `dim` (a size other than 1 is left
 * alone, as PyTorch does). A view.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { zeros } from "../../../mod.ts";
 * assert.deepStrictEqual(zeros([2, 1, 3, 1]).squeeze().shape, [2, 3]);
 * assert.deepStrictEqual(zeros([2, 1, 3, 1]).squeeze(1).shape, [2, 3, 1]);
 * ```
 */
export function squeeze(t: Tensor, dim?: number | readonly number[]): Tensor {
  const dims = dim === undefined
    ? t.shape.map((_, i) => i)
    : (typeof dim === "number" ? [dim] : dim).map((d) => normalizeDim(d, t.ndim, "squeeze"));
  const drop = (i: number) => dims.includes(i) && t.shape[i] === 1;
  const shape = t.shape.filter((_, i) => !drop(i));
  const strides = t.strides.filter((_, i) => !drop(i));
  return reshapedView(t, "SqueezeBackward", shape, strides);
}

/**
 * `t` with a new size-1 dimension at `dim` (0 to ndim; negative counts from the end). A view.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { zeros } from "../../../mod.ts";
 * assert.deepStrictEqual(zeros([2, 3]).unsqueeze(1).shape, [2, 1, 3]);
 * assert.deepStrictEqual(zeros([2, 3]).unsqueeze(-1).shape, [2, 3, 1]);
 * ```
 */
export function unsqueeze(t: Tensor, dim: number): Tensor {
  const d = normalizeDim(dim, t.ndim + 1, "unsqueeze");
  const shape = [...t.shape], strides = [...t.strides];
  // Any stride works for a size-1 dimension; this one keeps a contiguous tensor contiguous.
  const stride = d < t.ndim ? t.strides[d] * t.shape[d] : 1;
  shape.splice(d, 0, 1);
  strides.splice(d, 0, stride);
  return reshapedView(t, "UnsqueezeBackward", shape, strides);
}

/**
 * `t` with its dimensions reordered: output dimension i is input dimension `dims[i]`. A view.
 *
 * @example Channels last to channels first
 * ```ts
 * import assert from "node:assert/strict";
 * import { zeros } from "../../../mod.ts";
 * const x = zeros([2, 4, 4, 3]).permute(0, 3, 1, 2);
 * assert.deepStrictEqual(x.shape, [2, 3, 4, 4]);
 * assert.equal(x.isContiguous(), false);
 * ```
 */
export function permute(t: Tensor, dims: readonly number[]): Tensor {
  if (dims.length !== t.ndim) {
    throw new RangeError(
      `permute: dims ${formatShape(dims)} must name each of the ${t.ndim} dimensions of ${
        formatShape(t.shape)
      } once`,
    );
  }
  const order = dims.map((d) => normalizeDim(d, t.ndim, "permute"));
  if (new Set(order).size !== order.length) {
    throw new RangeError(`permute: dims ${formatShape(dims)} repeat a dimension`);
  }
  const inverse = new Array<number>(order.length);
  order.forEach((d, i) => (inverse[d] = i));
  const view = (x: Tensor, perm: number[]) =>
    x.alias(perm.map((d) => x.shape[d]), perm.map((d) => x.strides[d]));
  return record(view(t, order), "PermuteBackward", [t], (gy) => [view(gy, inverse)], [], []);
}

function triangle(t: Tensor, diagonal: number, upper: boolean): Tensor {
  const op = upper ? "triu" : "tril";
  if (t.ndim < 2) {
    throw new RangeError(
      `${op}: input must have at least 2 dimensions, got ${formatShape(t.shape)}`,
    );
  }
  if (!Number.isInteger(diagonal)) {
    throw new RangeError(`${op}: diagonal must be an integer, got ${diagonal}`);
  }
  refuseStorageOnly(op, t.dtype);
  if (t.dtype === "bool") {
    throw new TypeError(`${op}: bool input is not supported; convert it with .to("i32")`);
  }
  const half = viaF32(op, [t], (x) => triangle(x, diagonal, upper));
  if (half) return half;
  const src = contiguous(t);
  const rows = t.shape[t.ndim - 2], cols = t.shape[t.ndim - 1];
  const batch = shapeSize(t.shape.slice(0, -2));
  const out = emptyOn(src, t.shape, t.dtype);
  const dev = out.storage.backend;
  const flag = upper ? 1 : 0;
  dev.check(dev.kernels.tril(src.ptr, out.ptr, batch, rows, cols, diagonal, flag));
  return record(
    out,
    upper ? "TriuBackward" : "TrilBackward",
    [src],
    (gy) => {
      const gx = emptyOn(gy, gy.shape);
      dev.check(dev.kernels.tril(gy.ptr, gx.ptr, batch, rows, cols, diagonal, flag));
      return [gx];
    },
    temporaries([src, t]),
    [],
  );
}

/**
 * The lower triangle of the last two dimensions: elements with column - row <= `diagonal`, the
 * rest zero (PyTorch's `torch.tril`).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { ones } from "../../../mod.ts";
 * assert.deepStrictEqual(ones([3, 3]).tril().tolist(), [[1, 0, 0], [1, 1, 0], [1, 1, 1]]);
 * ```
 */
export function tril(t: Tensor, diagonal = 0): Tensor {
  return triangle(t, diagonal, false);
}

/**
 * The upper triangle of the last two dimensions: elements with column - row >= `diagonal`, the
 * rest zero (PyTorch's `torch.triu`).
 *
 * @example The future positions of a causal mask
 * ```ts
 * import assert from "node:assert/strict";
 * import { ones } from "../../../mod.ts";
 * assert.deepStrictEqual(ones([3, 3]).triu(1).tolist(), [[0, 1, 1], [0, 0, 1], [0, 0, 0]]);
 * ```
 */
export function triu(t: Tensor, diagonal = 0): Tensor {
  return triangle(t, diagonal, true);
}
