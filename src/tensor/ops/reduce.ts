/** Reductions: sum and mean over everything or one dimension, the broadcast-gradient reduction, argmax. @module */

import { record } from "../autograd.ts";
import { formatShape, normalizeDim, sameShape, shapeSize } from "../layout.ts";
import type { Tensor } from "../tensor.ts";
import { alias, emptyOn, expectF32, temporaries } from "./_util.ts";
import { contiguous } from "./shape.ts";

/** Sum (or mean) over dimension `dim`, or over all elements when `dim` is undefined. */
function reduce(t: Tensor, dim: number | undefined, keepdim: boolean, mean: boolean): Tensor {
  const op = mean ? "mean" : "sum";
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

/** The sum of all elements, or over `dim` (dropped unless `keepdim`). */
export function sum(t: Tensor, dim?: number, keepdim = false): Tensor {
  return reduce(t, dim, keepdim, false);
}

/** The mean of all elements, or over `dim` (dropped unless `keepdim`). */
export function mean(t: Tensor, dim?: number, keepdim = false): Tensor {
  return reduce(t, dim, keepdim, true);
}

/**
 * Sums a broadcast gradient back to `shape` (the shape before broadcasting): over extra leading
 * dimensions, and over dimensions that were 1. A fresh contiguous tensor.
 */
export function sumToShape(g: Tensor, shape: readonly number[]): Tensor {
  const src = contiguous(g);
  const dev = src.storage.backend;
  const lead = src.ndim - shape.length;
  let current = src;
  const leadSize = shapeSize(src.shape.slice(0, lead));
  if (lead > 0) {
    const next = emptyOn(src, src.shape.slice(lead));
    dev.check(dev.kernels.sumAxis(current.ptr, next.ptr, 1, leadSize, next.numel(), 1));
    current = next;
  }
  for (let d = 0; d < shape.length; d++) {
    if (shape[d] !== 1 || current.shape[d] === 1) continue;
    const next = emptyOn(src, current.shape.map((s, i) => (i === d ? 1 : s)));
    dev.check(dev.kernels.sumAxis(
      current.ptr,
      next.ptr,
      shapeSize(current.shape.slice(0, d)),
      current.shape[d],
      shapeSize(current.shape.slice(d + 1)),
      1,
    ));
    if (current !== src) current.dispose();
    current = next;
  }
  if (current === src) return alias(src, shape);
  if (src !== g) src.dispose();
  return sameShape(current.shape, shape) ? current : alias(current, shape);
}

/** Indices of the largest values along the last dimension (i32; first index on ties). */
export function argmax(t: Tensor, dim = -1): Tensor {
  expectF32("argmax", t);
  if (normalizeDim(dim, t.ndim, "argmax") !== t.ndim - 1) {
    throw new RangeError(
      `argmax: only the last dimension is supported, got ${dim} for ${formatShape(t.shape)}`,
    );
  }
  const src = contiguous(t);
  const cols = t.shape[t.ndim - 1];
  const out = emptyOn(src, t.shape.slice(0, -1), "i32");
  const dev = out.storage.backend;
  dev.check(dev.kernels.argmaxRows(src.ptr, out.ptr, out.numel(), cols));
  if (src !== t) src.dispose();
  return out;
}
