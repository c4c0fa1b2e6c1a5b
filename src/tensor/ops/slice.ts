/**
 * Ops that take part of a tensor along one dimension, as views of its memory (PyTorch's `narrow`,
 * `select`, `split`, `chunk`). Their gradients are the incoming gradient written into a zeroed
 * tensor of the input's shape, at the place the view covers.
 * @module
 */

import { record } from "../autograd.ts";
import { formatShape, normalizeDim } from "../layout.ts";
import type { Tensor } from "../tensor.ts";
import { emptyOn } from "./_util.ts";
import { contiguous } from "./shape.ts";
import { itemSize } from "../dtype.ts";

/** Writes contiguous `src` into the strided view `dst` (same shape and dtype). */
export function copyToView(dst: Tensor, src: Tensor): void {
  let packed = src;
  if (!src.isContiguous()) {
    using view = src.detach();
    packed = contiguous(view);
  }
  const dev = dst.storage.backend;
  // A 0-d view (the gradient of select() down to a scalar) is one element of shape [1]: Deno
  // passes an empty array as a NULL pointer, which the kernels refuse.
  const scalar = dst.ndim === 0;
  dev.check(dev.kernels.copyToStrided(
    packed.ptr,
    dst.ptr,
    scalar ? 1 : dst.ndim,
    new BigInt64Array(scalar ? [1n] : dst.shape.map(BigInt)),
    new BigInt64Array(scalar ? [1n] : dst.strides.map(BigInt)),
    itemSize(dst.dtype),
  ));
  if (packed !== src) packed.dispose();
}

/**
 * A gradient of `input`'s shape that is zero except where `place(grad)` views, which gets `gy`.
 */
function scatterBack(input: Tensor, gy: Tensor, place: (grad: Tensor) => Tensor): Tensor {
  const grad = emptyOn(gy, input.shape, gy.dtype, true);
  copyToView(place(grad), gy);
  return grad;
}

/** The view `[start, start + length)` of `t` along `dim`, with `t`'s strides. */
function narrowView(t: Tensor, dim: number, start: number, length: number): Tensor {
  const shape = [...t.shape];
  shape[dim] = length;
  return t.alias(shape, t.strides, t.offset + start * t.strides[dim]);
}

/**
 * The elements `start` to `start + length - 1` of `t` along `dim`, as a view (PyTorch's
 * `torch.narrow`); a negative `start` counts from the end.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { arange } from "../../../mod.ts";
 * const x = arange(0, 6).reshape([2, 3]);
 * assert.deepStrictEqual(Array.from(x.narrow(1, 1, 2).toArray()), [1, 2, 4, 5]);
 * ```
 */
export function narrow(t: Tensor, dim: number, start: number, length: number): Tensor {
  const d = normalizeDim(dim, t.ndim, "narrow");
  if (t.ndim === 0) throw new RangeError("narrow: cannot narrow a 0-d tensor");
  const size = t.shape[d];
  const s = start < 0 ? start + size : start;
  if (!Number.isInteger(start) || !Number.isInteger(length) || length < 0) {
    throw new RangeError(
      `narrow: start ${start} and length ${length} must be integers, length >= 0`,
    );
  }
  if (s < 0 || s + length > size) {
    throw new RangeError(
      `narrow: start ${start} + length ${length} exceeds dimension ${dim} of size ${size} (${
        formatShape(t.shape)
      })`,
    );
  }
  const out = narrowView(t, d, s, length);
  return record(
    out,
    "NarrowBackward",
    [t],
    (gy) => [scatterBack(t, gy, (g) => narrowView(g, d, s, length))],
    [],
    [],
  );
}

/**
 * The slice of `t` at `index` along `dim`, with that dimension removed, as a view (PyTorch's
 * `torch.select`, `x[:, i]`); a negative `index` counts from the end.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { arange } from "../../../mod.ts";
 * const x = arange(0, 6).reshape([2, 3]);
 * assert.deepStrictEqual(x.select(1, -1).shape, [2]);
 * assert.deepStrictEqual(Array.from(x.select(1, -1).toArray()), [2, 5]);
 * ```
 */
export function select(t: Tensor, dim: number, index: number): Tensor {
  if (t.ndim === 0) throw new RangeError("select: cannot select from a 0-d tensor");
  const d = normalizeDim(dim, t.ndim, "select");
  const size = t.shape[d];
  const i = index < 0 ? index + size : index;
  if (!Number.isInteger(index) || i < 0 || i >= size) {
    throw new RangeError(
      `select: index ${index} is out of range for dimension ${dim} of size ${size}`,
    );
  }
  const view = (x: Tensor) =>
    x.alias(
      x.shape.filter((_, k) => k !== d),
      x.strides.filter((_, k) => k !== d),
      x.offset + i * x.strides[d],
    );
  return record(view(t), "SelectBackward", [t], (gy) => [scatterBack(t, gy, view)], [], []);
}

/**
 * Splits `t` along `dim` into views of `splitSize` elements (the last may be smaller), or into
 * pieces of the given sizes, which must add up to the dimension (PyTorch's `torch.split`).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { arange } from "../../../mod.ts";
 * const [a, b] = arange(0, 10).split([3, 7]);
 * assert.deepStrictEqual([a.shape, b.shape], [[3], [7]]);
 * assert.deepStrictEqual(arange(0, 10).split(4).map((p) => p.shape[0]), [4, 4, 2]);
 * ```
 */
export function split(
  t: Tensor,
  splitSizeOrSections: number | readonly number[],
  dim = 0,
): Tensor[] {
  if (t.ndim === 0) throw new RangeError("split: cannot split a 0-d tensor");
  const d = normalizeDim(dim, t.ndim, "split");
  const size = t.shape[d];
  let sizes: number[];
  if (typeof splitSizeOrSections === "number") {
    const step = splitSizeOrSections;
    if (!Number.isInteger(step) || step <= 0) {
      throw new RangeError(`split: split size must be a positive integer, got ${step}`);
    }
    sizes = [];
    for (let at = 0; at < size; at += step) sizes.push(Math.min(step, size - at));
    if (size === 0) sizes.push(0);
  } else {
    sizes = [...splitSizeOrSections];
    const total = sizes.reduce((a, b) => a + b, 0);
    if (sizes.some((s) => !Number.isInteger(s) || s < 0) || total !== size) {
      throw new RangeError(
        `split: sizes [${sizes.join(", ")}] must be non-negative integers adding up to ${size} ` +
          `(dimension ${dim} of ${formatShape(t.shape)})`,
      );
    }
  }
  const pieces: Tensor[] = [];
  let start = 0;
  for (const length of sizes) {
    pieces.push(narrow(t, d, start, length));
    start += length;
  }
  return pieces;
}

/**
 * Splits `t` along `dim` into `chunks` views of equal size (the last may be smaller, and fewer
 * come back when the dimension is too short), like PyTorch's `torch.chunk`.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { arange } from "../../../mod.ts";
 * assert.deepStrictEqual(arange(0, 10).chunk(3).map((p) => p.shape[0]), [4, 4, 2]);
 * ```
 */
export function chunk(t: Tensor, chunks: number, dim = 0): Tensor[] {
  if (!Number.isInteger(chunks) || chunks <= 0) {
    throw new RangeError(`chunk: number of chunks must be a positive integer, got ${chunks}`);
  }
  if (t.ndim === 0) throw new RangeError("chunk: cannot chunk a 0-d tensor");
  const size = t.shape[normalizeDim(dim, t.ndim, "chunk")];
  return split(t, Math.max(1, Math.ceil(size / chunks)), dim);
}
