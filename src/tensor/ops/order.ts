/**
 * Order-based ops: `clamp`, `abs`, elementwise `maximum`/`minimum` (broadcasting), and `max`/`min`
 * over everything or over one dimension with the indices, on the kernels of csrc/core/order.c.
 * @module
 */

import { record } from "../autograd.ts";
import { broadcastShapes, formatShape, normalizeDim, sameShape } from "../layout.ts";
import type { Tensor } from "../tensor.ts";
import { isHalf } from "../dtype.ts";
import { emptyOn, expectF32, expectSameDevice, temporaries } from "./_util.ts";
import { moveDimLast } from "./_axis.ts";
import { viaF32 } from "./_half.ts";
import { to } from "./shape.ts";
import { contiguous, expand, reshape } from "./shape.ts";

/**
 * Limits every element to [min, max] (either bound may be left out, not both), PyTorch's `clamp`.
 * The gradient passes where min <= x <= max; when min > max every element becomes max.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { tensor } from "../../../mod.ts";
 * assert.deepEqual(Array.from(tensor([-2, 0.5, 3]).clamp(-1, 1).toArray()), [-1, 0.5, 1]);
 * assert.deepEqual(Array.from(tensor([-2, 0.5, 3]).clamp(null, 0).toArray()), [-2, 0, 0]);
 * ```
 */
export function clamp(t: Tensor, min?: number | null, max?: number | null): Tensor {
  const half = viaF32("clamp", [t], (x) => clamp(x, min, max));
  if (half) return half;
  expectF32("clamp", t);
  if ((min === undefined || min === null) && (max === undefined || max === null)) {
    throw new RangeError("clamp: at least one of min and max must be given, got neither");
  }
  for (const [name, v] of [["min", min], ["max", max]] as const) {
    if (v !== undefined && v !== null && typeof v !== "number") {
      throw new TypeError(`clamp: ${name} must be a number, got ${typeof v} ${String(v)}`);
    }
  }
  const lo = min ?? -Infinity, hi = max ?? Infinity;
  const x = contiguous(t);
  const y = emptyOn(x, x.shape);
  const dev = y.storage.backend;
  dev.check(dev.kernels.clamp(x.ptr, y.ptr, x.numel(), lo, hi));
  return record(
    y,
    "ClampBackward",
    [x],
    (gy) => {
      const gx = emptyOn(x, x.shape);
      dev.check(dev.kernels.clampBackward(x.ptr, gy.ptr, gx.ptr, x.numel(), lo, hi));
      return [gx];
    },
    temporaries([x, t]),
    [x],
  );
}

/**
 * |x|, with gradient sign(x) (0 at 0, as PyTorch).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { tensor } from "../../../mod.ts";
 * assert.deepEqual(Array.from(tensor([-2, 0, 3]).abs().toArray()), [2, 0, 3]);
 * ```
 */
export function abs(t: Tensor): Tensor {
  const half = viaF32("abs", [t], abs);
  if (half) return half;
  expectF32("abs", t);
  const x = contiguous(t);
  const y = emptyOn(x, x.shape);
  const dev = y.storage.backend;
  dev.check(dev.kernels.abs(x.ptr, y.ptr, x.numel()));
  return record(
    y,
    "AbsBackward",
    [x],
    (gy) => {
      const gx = emptyOn(x, x.shape);
      dev.check(dev.kernels.absBackward(x.ptr, gy.ptr, gx.ptr, x.numel()));
      return [gx];
    },
    temporaries([x, t]),
    [x],
  );
}

function extremum(a: Tensor, b: Tensor, isMin: boolean): Tensor {
  const op = isMin ? "minimum" : "maximum";
  const half = viaF32(op, [a, b], (x, y) => extremum(x, y, isMin));
  if (half) return half;
  expectF32(op, a, b);
  expectSameDevice(op, a, b);
  const shape = broadcastShapes(op, a.shape, b.shape);
  // Broadcast operands are expanded first; the expand's backward sums their gradients back.
  const fit = (t: Tensor) => contiguous(sameShape(t.shape, shape) ? t : expand(t, shape));
  const x = fit(a), y = fit(b);
  const out = emptyOn(x, shape);
  const dev = out.storage.backend;
  const n = out.numel(), flag = isMin ? 1 : 0;
  dev.check(dev.kernels.maximum(x.ptr, y.ptr, out.ptr, n, flag));
  return record(
    out,
    isMin ? "MinimumBackward" : "MaximumBackward",
    [x, y],
    (gy) => {
      const ga = x.requiresGrad ? emptyOn(x, shape) : null;
      const gb = y.requiresGrad ? emptyOn(y, shape) : null;
      dev.check(
        dev.kernels.maximumBackward(
          x.ptr,
          y.ptr,
          gy.ptr,
          ga?.ptr ?? null,
          gb?.ptr ?? null,
          n,
          flag,
        ),
      );
      return [ga, gb];
    },
    temporaries([x, a], [y, b]),
    [x, y],
  );
}

/**
 * The elementwise maximum of two tensors, broadcasting; on ties each side gets half the gradient,
 * as in PyTorch. NaN propagates.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { maximum, tensor } from "../../../mod.ts";
 * assert.deepEqual(Array.from(maximum(tensor([[1, 5]]), tensor([3])).toArray()), [3, 5]);
 * ```
 */
export function maximum(a: Tensor, b: Tensor): Tensor {
  return extremum(a, b, false);
}

/**
 * The elementwise minimum of two tensors, broadcasting; ties split the gradient like `maximum`.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { minimum, tensor } from "../../../mod.ts";
 * assert.deepEqual(Array.from(minimum(tensor([1, 5]), tensor([3, 3])).toArray()), [1, 3]);
 * ```
 */
export function minimum(a: Tensor, b: Tensor): Tensor {
  return extremum(a, b, true);
}

/**
 * What `max`/`min` over a dimension return: the extreme values and their i32 indices (PyTorch's
 * namedtuple `(values, indices)`, as an object to destructure: `const { values, indices } = ...`).
 */
export interface ValuesIndices {
  /** The largest (smallest) values along the dimension. */
  values: Tensor;
  /** Their positions along the dimension (i32; the first on ties). */
  indices: Tensor;
}

/** The extreme of all elements; the gradient is shared evenly between ties (as PyTorch). */
function extremeAll(t: Tensor, isMin: boolean): Tensor {
  const op = isMin ? "min" : "max";
  if (t.numel() === 0) {
    throw new RangeError(`${op}: expected a non-empty tensor, got ${formatShape(t.shape)}`);
  }
  const x = contiguous(t);
  const out = emptyOn(x, []);
  const dev = out.storage.backend;
  dev.check(dev.kernels.maxRows(x.ptr, out.ptr, null, 1, x.numel(), isMin ? 1 : 0));
  return record(
    out,
    isMin ? "MinBackward1" : "MaxBackward1",
    [x],
    (gy) => {
      const gx = emptyOn(x, x.shape);
      dev.check(dev.kernels.extremeBackward(x.ptr, out.ptr, gy.ptr, gx.ptr, x.numel()));
      return [gx];
    },
    temporaries([x, t]),
    [x, out],
  );
}

/** The extreme along `dim` with its indices; the gradient goes to the index returned. */
function extremeDim(t: Tensor, dim: number, keepdim: boolean, isMin: boolean): ValuesIndices {
  const op = isMin ? "min" : "max";
  const d = normalizeDim(dim, t.ndim, op);
  const size = t.ndim === 0 ? 1 : t.shape[d];
  if (size === 0) {
    throw new RangeError(
      `${op}: dimension ${dim} of ${formatShape(t.shape)} is empty, so it has no ${op}`,
    );
  }
  const outShape = t.shape.filter((_, i) => i !== d);
  const moved = moveDimLast(t, d);
  const x = contiguous(moved);
  const rows = x.numel() / size;
  const values = emptyOn(x, outShape), indices = emptyOn(x, outShape, "i32");
  const dev = values.storage.backend;
  dev.check(dev.kernels.maxRows(x.ptr, values.ptr, indices.ptr, rows, size, isMin ? 1 : 0));
  const v = record(
    values,
    isMin ? "MinBackward0" : "MaxBackward0",
    [x],
    (gy) => {
      const gx = emptyOn(x, x.shape);
      dev.check(dev.kernels.indexRowsBackward(gy.ptr, indices.ptr, gx.ptr, rows, size));
      return [gx];
    },
    temporaries([x, moved]),
    [indices],
  );
  if (!keepdim || t.ndim === 0) return { values: v, indices };
  const kept = t.shape.map((s, i) => (i === d ? 1 : s));
  return { values: reshape(v, kept), indices: reshape(indices, kept) };
}

/**
 * The largest element (a 0-d tensor), or with `dim` the largest values along it and their indices,
 * PyTorch's `torch.max(input)` / `torch.max(input, dim, keepdim)`. NaN counts as the largest.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { max, tensor } from "../../../mod.ts";
 * const x = tensor([[1, 7, 3], [9, 2, 9]]);
 * assert.equal(max(x).item(), 9);
 * const { values, indices } = max(x, 1);
 * assert.deepEqual(Array.from(values.toArray()), [7, 9]);
 * assert.deepEqual(Array.from(indices.toArray()), [1, 0]);
 * ```
 */
export function max(t: Tensor): Tensor;
/** The largest values along `dim` and their i32 indices (`keepdim` keeps `dim` with size 1). */
export function max(t: Tensor, dim: number, keepdim?: boolean): ValuesIndices;
export function max(t: Tensor, dim?: number, keepdim = false): Tensor | ValuesIndices {
  return extreme(t, dim, keepdim, false);
}

/**
 * The smallest element, or with `dim` the smallest values along it and their indices (see `max`).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { min, tensor } from "../../../mod.ts";
 * const x = tensor([[1, 7, 3], [9, 2, 9]]);
 * assert.equal(min(x).item(), 1);
 * assert.deepEqual(Array.from(min(x, 0, true).indices.toArray()), [0, 1, 0]);
 * ```
 */
export function min(t: Tensor): Tensor;
/** The smallest values along `dim` and their i32 indices (`keepdim` keeps `dim` with size 1). */
export function min(t: Tensor, dim: number, keepdim?: boolean): ValuesIndices;
export function min(t: Tensor, dim?: number, keepdim = false): Tensor | ValuesIndices {
  return extreme(t, dim, keepdim, true);
}

/** max or min; a half input's values are exact in f32, so they come back in its dtype unrounded. */
function extreme(
  t: Tensor,
  dim: number | undefined,
  keepdim: boolean,
  isMin: boolean,
): Tensor | ValuesIndices {
  const op = isMin ? "min" : "max";
  if (dim === undefined) {
    return viaF32(op, [t], (x) => extremeAll(x, isMin)) ?? (expectF32(op, t), extremeAll(t, isMin));
  }
  if (!isHalf(t.dtype)) {
    expectF32(op, t);
    return extremeDim(t, dim, keepdim, isMin);
  }
  const wide = to(t, "f32");
  const { values, indices } = extremeDim(wide, dim, keepdim, isMin);
  const out = { values: to(values, t.dtype), indices };
  if (out.values.gradFn === null) [wide, values].forEach((x) => x.dispose());
  return out;
}
