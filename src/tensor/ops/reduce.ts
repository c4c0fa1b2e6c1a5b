/**
 * Reductions: sum, mean, variance and standard deviation over everything or some dimensions,
 * argmax, and the sum of squares behind gradient norms.
 * @module
 */

import { record } from "../autograd.ts";
import { formatShape, normalizeDim, shapeSize } from "../layout.ts";
import type { Tensor } from "../tensor.ts";
import { emptyOn, expectF32, temporaries } from "./_util.ts";
import { moveDimLast, normalizeDims } from "./_axis.ts";
import { viaF32 } from "./_half.ts";
import { mul, sqrt, sub } from "./elementwise.ts";
import { contiguous, detach, reshape } from "./shape.ts";

/** Sum (or mean) over dimension `dim`, or over all elements when `dim` is undefined. */
function reduce(t: Tensor, dim: number | undefined, keepdim: boolean, mean: boolean): Tensor {
  const op = mean ? "mean" : "sum";
  const half = viaF32(op, [t], (x) => reduce(x, dim, keepdim, mean));
  if (half) return half;
  expectF32(op, t);
  const src = contiguous(t);
  let outer = 1, axis = t.numel(), inner = 1;
  let outShape: number[] = [];
  if (dim !== undefined) {
    const d = normalizeDim(dim, t.ndim, op);
    outer = shapeSize(t.shape.slice(0, d));
    axis = t.ndim === 0 ? 1 : t.shape[d];
    inner = shapeSize(t.shape.slice(d + 1));
    outShape = keepdim
      ? t.shape.map((s, i) => (i === d ? 1 : s))
      : t.shape.filter((_, i) => i !== d);
  } else if (keepdim) {
    outShape = t.shape.map(() => 1);
  }
  const scale = mean ? 1 / axis : 1;
  const out = emptyOn(src, outShape);
  const dev = out.storage.backend;
  dev.check(dev.kernels.sumAxis(src.ptr, out.ptr, outer, axis, inner, scale));
  return record(
    out,
    mean ? "MeanBackward" : "SumBackward",
    [src],
    (gy) => {
      const gx = emptyOn(src, src.shape);
      dev.check(dev.kernels.expandAxis(gy.ptr, gx.ptr, outer, axis, inner, scale));
      return [gx];
    },
    temporaries([src, t]),
    [],
  );
}

/** Reduces over several dimensions, one at a time from the last, keeping them until the end. */
function reduceDims(
  t: Tensor,
  dim: number | readonly number[] | null | undefined,
  keepdim: boolean,
  mean: boolean,
): Tensor {
  if (typeof dim === "number") return reduce(t, dim, keepdim, mean);
  const dims = normalizeDims(dim, t.ndim, mean ? "mean" : "sum").sort((a, b) => b - a);
  if (dims.length >= t.ndim) return reduce(t, undefined, keepdim, mean);
  if (dims.length === 1) return reduce(t, dims[0], keepdim, mean);
  let out = t;
  for (const d of dims) out = reduce(out, d, true, mean);
  return keepdim ? out : reshape(out, t.shape.filter((_, i) => !dims.includes(i)));
}

/**
 * The sum of all elements, or over `dim` (one dimension or several; dropped unless `keepdim`),
 * PyTorch's `sum`.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { tensor } from "../../../mod.ts";
 * const x = tensor([[[1, 2], [3, 4]], [[5, 6], [7, 8]]]);
 * assert.equal(x.sum().item(), 36);
 * assert.deepEqual(Array.from(x.sum([0, 2]).toArray()), [14, 22]);
 * assert.deepEqual(x.sum([0, 2], true).shape, [1, 2, 1]);
 * ```
 */
export function sum(t: Tensor, dim?: number | readonly number[] | null, keepdim = false): Tensor {
  return reduceDims(t, dim, keepdim, false);
}

/**
 * The mean of all elements, or over `dim` (one dimension or several; dropped unless `keepdim`).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { tensor } from "../../../mod.ts";
 * const x = tensor([[1, 2], [3, 6]]);
 * assert.equal(x.mean().item(), 3);
 * assert.deepEqual(Array.from(x.mean(-1).toArray()), [1.5, 4.5]);
 * ```
 */
export function mean(t: Tensor, dim?: number | readonly number[] | null, keepdim = false): Tensor {
  return reduceDims(t, dim, keepdim, true);
}

/**
 * Indices (i32) of the largest values along `dim` (the last by default, which differs from
 * PyTorch's flattened default), the first on ties.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { tensor } from "../../../mod.ts";
 * const x = tensor([[1, 7, 3], [9, 2, 9]]);
 * assert.deepEqual(Array.from(x.argmax().toArray()), [1, 0]);
 * assert.deepEqual(Array.from(x.argmax(0).toArray()), [1, 0, 1]);
 * assert.deepEqual(x.argmax(0, true).shape, [1, 3]);
 * ```
 */
export function argmax(t: Tensor, dim = -1, keepdim = false): Tensor {
  const half = viaF32("argmax", [t], (x) => argmax(x, dim, keepdim), () => "i32");
  if (half) return half;
  expectF32("argmax", t);
  const d = normalizeDim(dim, t.ndim, "argmax");
  const cols = t.ndim === 0 ? 1 : t.shape[d];
  if (cols === 0) {
    throw new RangeError(`argmax: dimension ${dim} of ${formatShape(t.shape)} is empty`);
  }
  const moved = t.ndim === 0 ? t : moveDimLast(detach(t), d);
  const src = contiguous(moved);
  const out = emptyOn(
    src,
    keepdim ? t.shape.map((s, i) => (i === d ? 1 : s)) : t.shape.filter((_, i) => i !== d),
    "i32",
  );
  const dev = out.storage.backend;
  dev.check(dev.kernels.argmaxRows(src.ptr, out.ptr, out.numel(), cols));
  if (src !== moved) src.dispose();
  return out;
}

/** Options of {@linkcode variance} and {@linkcode std}. */
export interface VarianceOptions {
  /** Subtracted from the element count in the divisor (default 1, Bessel's correction, as PyTorch). */
  correction?: number;
  /** Keep the reduced dimensions with size 1 (default false). */
  keepdim?: boolean;
}

function varianceOf(
  op: string,
  t: Tensor,
  dim: number | readonly number[] | null | undefined,
  options: VarianceOptions,
): Tensor {
  const half = viaF32(op, [t], (x) => varianceOf(op, x, dim, options));
  if (half) return half;
  expectF32(op, t);
  const correction = options.correction ?? 1;
  if (typeof correction !== "number" || !Number.isFinite(correction)) {
    throw new RangeError(`${op}: correction must be a finite number, got ${correction}`);
  }
  const dims = normalizeDims(dim, t.ndim, op);
  const n = dims.reduce((acc, d) => acc * (t.ndim === 0 ? 1 : t.shape[d]), 1);
  const centered = sub(t, mean(t, dims, true));
  const squares = sum(mul(centered, centered), dims, options.keepdim ?? false);
  // n <= correction divides by 0 and gives inf or NaN, as PyTorch does.
  return mul(squares, 1 / Math.max(n - correction, 0));
}

/**
 * The variance over `dim` (one dimension, several, or all when absent), dividing by
 * `N - correction`; PyTorch's `var(dim, correction=1, keepdim=False)` (its deprecated `unbiased`
 * is `correction` 1 or 0 here). A method `x.var()`; free as `variance` (`var` is reserved in JS).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { tensor, variance } from "../../../mod.ts";
 * const x = tensor([[1, 3], [5, 11]]);
 * assert.ok(Math.abs(x.var().item() - 56 / 3) < 1e-5); // deviations -4, -2, 0, 6 from 5
 * assert.deepEqual(Array.from(variance(x, 1, { correction: 0 }).toArray()), [1, 9]);
 * ```
 */
export function variance(
  t: Tensor,
  dim?: number | readonly number[] | null,
  options: VarianceOptions = {},
): Tensor {
  return varianceOf("var", t, dim, options);
}

/**
 * The standard deviation: the square root of {@linkcode variance}, with the same arguments.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { std, tensor } from "../../../mod.ts";
 * const x = tensor([[1, 3], [5, 11]]);
 * assert.deepEqual(Array.from(std(x, 1, { correction: 0, keepdim: true }).toArray()), [1, 3]);
 * ```
 */
export function std(
  t: Tensor,
  dim?: number | readonly number[] | null,
  options: VarianceOptions = {},
): Tensor {
  // One rounding for a half input, as PyTorch's std kernel.
  return viaF32("std", [t], (x) => std(x, dim, options)) ??
    sqrt(varianceOf("std", t, dim, options));
}

/**
 * The sum of the squares of all of `t`'s elements as a 0-d tensor on its device, in one pass with
 * no temporary (the squared L2 norm that gradient clipping and divergence checks read); outside
 * autograd.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { tensor } from "../../../mod.ts";
 * import { sumSquares } from "./reduce.ts";
 * assert.equal(sumSquares(tensor([[1, -2], [3, 0]])).item(), 14);
 * ```
 */
export function sumSquares(t: Tensor): Tensor {
  const half = viaF32("sumSquares", [t], sumSquares, () => "f32");
  if (half) return half;
  expectF32("sumSquares", t);
  const src = contiguous(t);
  const out = emptyOn(src, []);
  const dev = out.storage.backend;
  dev.check(dev.kernels.sumSquares(src.ptr, src.numel(), out.ptr));
  if (src !== t) src.dispose();
  return out;
}
