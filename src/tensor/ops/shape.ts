/** View and layout ops: reshape, view, flatten, transpose, expand (and summing a broadcast gradient back), contiguous, detach, clone, and the dtype and device conversions. @module */

import { record } from "../autograd.ts";
import { castFloat, copyInto } from "../inplace.ts";
import {
  checkShape,
  contiguousStrides,
  formatShape,
  normalizeDim,
  sameShape,
  shapeSize,
} from "../layout.ts";
import type { Device } from "../storage.ts";
import {
  checkDType,
  type DType,
  type FloatDType,
  type HalfDType,
  isFloat,
  isHalf,
} from "../dtype.ts";
import type { Tensor } from "../tensor.ts";
import { DTypeCode } from "../device/device.ts";
import { canonicalDeviceName } from "../device/mod.ts";
import { emptyOn, temporaries } from "./_util.ts";

/** A contiguous tensor with `t`'s elements: `t` itself when it already is (PyTorch semantics). */
export function contiguous(t: Tensor): Tensor {
  if (t.isContiguous()) return t;
  const out = emptyOn(t, t.shape, t.dtype);
  copyInto(out, t);
  return record(out, "ContiguousBackward", [t], (gy) => [gy.alias()], [], []);
}

/** Resolves one -1 in a requested shape against `numel` elements. */
function inferShape(shape: readonly number[], numel: number, op: string): number[] {
  const out = [...shape];
  const wild = out.indexOf(-1);
  if (wild !== out.lastIndexOf(-1)) {
    throw new RangeError(`${op}: only one dimension can be -1, got ${formatShape(shape)}`);
  }
  if (wild >= 0) {
    const known = shapeSize(out.filter((_, i) => i !== wild));
    if (known === 0 || numel % known !== 0) {
      throw new RangeError(
        `${op}: shape ${formatShape(shape)} is invalid for input of size ${numel}`,
      );
    }
    out[wild] = numel / known;
  }
  checkShape(out, op);
  if (shapeSize(out) !== numel) {
    throw new RangeError(
      `${op}: shape ${formatShape(shape)} is invalid for input of size ${numel}`,
    );
  }
  return out;
}

/** `t` with a new shape; a view when the layout allows, else a copy (PyTorch's `reshape`). */
export function reshape(t: Tensor, shape: readonly number[]): Tensor {
  const target = inferShape(shape, t.numel(), "reshape");
  const source = contiguous(t);
  const out = source.alias(target, contiguousStrides(target));
  return record(
    out,
    "ReshapeBackward",
    [source],
    (gy) => [gy.alias(source.shape, contiguousStrides(source.shape))],
    [],
    [],
  );
}

/**
 * The strides that show a tensor of `shape`/`strides` as `target` without copying, or null when
 * its layout does not allow it (PyTorch's `computeStride`): dimensions merge only where they are
 * laid out one after the other.
 */
function viewStrides(
  shape: readonly number[],
  strides: readonly number[],
  target: readonly number[],
): number[] | null {
  if (shape.length === 0 || shapeSize(shape) === 0) return contiguousStrides(target);
  const out = new Array<number>(target.length).fill(0);
  let viewD = target.length - 1;
  let chunkBase = strides[strides.length - 1];
  let tensorNumel = 1, viewNumel = 1;
  for (let d = shape.length - 1; d >= 0; d--) {
    tensorNumel *= shape[d];
    if (d === 0 || (shape[d - 1] !== 1 && strides[d - 1] !== tensorNumel * chunkBase)) {
      while (viewD >= 0 && (viewNumel < tensorNumel || target[viewD] === 1)) {
        out[viewD] = viewNumel * chunkBase;
        viewNumel *= target[viewD];
        viewD--;
      }
      if (viewNumel !== tensorNumel) return null;
      if (d > 0) {
        chunkBase = strides[d - 1];
        tensorNumel = 1;
        viewNumel = 1;
      }
    }
  }
  return viewD === -1 ? out : null;
}

/**
 * `t` in a new shape without copying (PyTorch's `view`): also a non-contiguous tensor whose
 * dimensions being merged or split are laid out one after the other; refuses any other layout.
 */
export function view(t: Tensor, shape: readonly number[]): Tensor {
  if (t.isContiguous()) return reshape(t, shape);
  const target = inferShape(shape, t.numel(), "view");
  const strides = viewStrides(t.shape, t.strides, target);
  if (strides === null) {
    throw new RangeError(
      `view: shape ${formatShape(t.shape)} with strides ${formatShape(t.strides)} is not ` +
        `compatible with a view as ${formatShape(shape)}; use .reshape(...) instead`,
    );
  }
  return record(
    t.alias(target, strides),
    "ViewBackward",
    [t],
    (gy) => [reshape(gy, t.shape)],
    [],
    [],
  );
}

/** `t` with dimensions `startDim`..`endDim` flattened into one. */
export function flatten(t: Tensor, startDim: number, endDim: number): Tensor {
  if (t.ndim === 0) return reshape(t, [1]);
  const s = normalizeDim(startDim, t.ndim, "flatten"), e = normalizeDim(endDim, t.ndim, "flatten");
  const middle = shapeSize(t.shape.slice(s, e + 1));
  return reshape(t, [...t.shape.slice(0, s), middle, ...t.shape.slice(e + 1)]);
}

/** The transpose of a tensor of at most 2 dimensions (a view). */
export function t(x: Tensor): Tensor {
  if (x.ndim > 2) {
    throw new RangeError(`t(): expects a tensor with <= 2 dimensions, got ${x.ndim}`);
  }
  return x.ndim < 2 ? identity(x) : transpose(x, 0, 1);
}

/** A view with dimensions `dim0` and `dim1` swapped. */
export function transpose(t: Tensor, dim0: number, dim1: number): Tensor {
  const a = normalizeDim(dim0, t.ndim, "transpose"), b = normalizeDim(dim1, t.ndim, "transpose");
  if (t.ndim === 0) return identity(t);
  const shape = [...t.shape], strides = [...t.strides];
  [shape[a], shape[b]] = [shape[b], shape[a]];
  [strides[a], strides[b]] = [strides[b], strides[a]];
  const out = t.alias(shape, strides);
  return record(out, "TransposeBackward", [t], (gy) => [transposeView(gy, a, b)], [], []);
}

function transposeView(t: Tensor, a: number, b: number): Tensor {
  const shape = [...t.shape], strides = [...t.strides];
  [shape[a], shape[b]] = [shape[b], shape[a]];
  [strides[a], strides[b]] = [strides[b], strides[a]];
  return t.alias(shape, strides);
}

/** A view of `t` repeated along new leading or size-1 dimensions (stride 0), like PyTorch's `expand`. */
export function expand(t: Tensor, shape: readonly number[]): Tensor {
  checkShape(shape.map((d) => (d === -1 ? 0 : d)), "expand");
  const lead = shape.length - t.ndim;
  if (lead < 0) {
    throw new RangeError(
      `expand: cannot expand ${formatShape(t.shape)} to fewer dimensions ${formatShape(shape)}`,
    );
  }
  const target: number[] = [], strides: number[] = [];
  for (let d = 0; d < shape.length; d++) {
    const src = d - lead;
    if (src < 0 && shape[d] === -1) {
      throw new RangeError(
        `expand: -1 is not allowed in a new leading dimension (${formatShape(shape)} for ${
          formatShape(t.shape)
        })`,
      );
    }
    const size = src >= 0 && shape[d] === -1 ? t.shape[src] : shape[d];
    if (src >= 0 && t.shape[src] !== size && t.shape[src] !== 1) {
      throw new RangeError(
        `expand: cannot expand ${formatShape(t.shape)} to ${formatShape(shape)}`,
      );
    }
    target.push(size);
    strides.push(src >= 0 && t.shape[src] === size ? t.strides[src] : 0);
  }
  if (sameShape(target, t.shape)) return identity(t);
  const out = t.alias(target, strides);
  return record(out, "ExpandBackward", [t], (gy) => [sumToShape(gy, t.shape)], [], []);
}

/** A new tensor object for `t`'s memory that stays in the graph (an identity op). */
export function identity(t: Tensor): Tensor {
  return record(t.alias(t.shape, t.strides), "AliasBackward", [t], (gy) => [gy.alias()], [], []);
}

/** A tensor sharing `t`'s memory, cut from the graph. */
export function detach(t: Tensor): Tensor {
  return t.alias(t.shape, t.strides);
}

/** A contiguous copy of `t` that stays in the graph. */
export function clone(t: Tensor): Tensor {
  const out = emptyOn(t, t.shape, t.dtype);
  copyInto(out, t);
  return record(out, "CloneBackward", [t], (gy) => [gy.alias()], [], []);
}

/**
 * Converts between f32, bf16, f16, i32 and bool, and from u16 to any of them (a copy; round to
 * nearest even from f32 to bf16 and f16, with PyTorch's bits; truncation toward zero for floats
 * to i32; non-zero is true, true is 1). Between floating-point dtypes the copy stays in the graph,
 * its gradient converted back, as PyTorch's ToCopyBackward. Nothing converts to u16: it holds
 * token data, made from a Uint16Array or read from a file.
 */
export function to(t: Tensor, dtype: DType): Tensor {
  if (t.dtype === dtype) return t;
  checkDType("to", dtype);
  if (dtype === "u16") {
    throw new TypeError(
      `to: ${t.dtype} to u16 is not supported; u16 tensors hold token data (tensor() of a Uint16Array)`,
    );
  }
  if (isFloat(t.dtype) && isFloat(dtype)) return floatCast(t, dtype);
  // Every other conversion with a 2-byte float, and u16 to anything but i32, passes through the
  // dtype the direct kernels take (f32 for the floats, i32 for u16).
  const via = isHalf(t.dtype) || isHalf(dtype)
    ? "f32"
    : t.dtype === "u16" && dtype !== "i32"
    ? "i32"
    : null;
  if (via !== null) {
    const wide = to(t, via);
    const out = to(wide, dtype);
    if (wide !== t) wide.dispose();
    return out;
  }
  const src = contiguous(t);
  const out = emptyOn(src, t.shape, dtype);
  const dev = out.storage.backend;
  dev.check(
    src.dtype === "u16"
      ? dev.kernels.castU16I32(src.ptr, out.ptr, t.numel())
      : src.dtype === "bool" || dtype === "bool"
      ? dev.kernels.cast(
        src.ptr,
        DTypeCode[src.dtype as "bool"],
        out.ptr,
        DTypeCode[dtype as "bool"],
        t.numel(),
      )
      : dtype === "f32"
      ? dev.kernels.castI32F32(src.ptr, out.ptr, t.numel())
      : dev.kernels.castF32I32(src.ptr, out.ptr, t.numel()),
  );
  if (src !== t) src.dispose();
  return out;
}

/** f32 to or from a 2-byte float, or bf16 to f16 through f32, differentiably. */
function floatCast(t: Tensor, dtype: FloatDType): Tensor {
  if (isHalf(t.dtype) && isHalf(dtype)) {
    const wide = floatCast(t, "f32");
    const out = floatCast(wide, dtype);
    wide.dispose();
    return out;
  }
  const src = contiguous(t);
  const out = emptyOn(src, t.shape, dtype);
  const dev = out.storage.backend;
  const n = t.numel();
  dev.check(
    dtype === "f32"
      ? dev.kernels.castHalfF32(src.ptr, DTypeCode[src.dtype as HalfDType], out.ptr, n)
      : dev.kernels.castF32Half(src.ptr, out.ptr, n, DTypeCode[dtype]),
  );
  const from = t.dtype as FloatDType;
  return record(out, "ToCopyBackward", [src], (gy) => [to(gy, from)], temporaries([src, t]), []);
}

/**
 * A copy of `t` on `device` (`t` itself when it is there already); the copy stays in the graph,
 * its gradient copied back to `t`'s device.
 */
export function toDevice(t: Tensor, device: Device): Tensor {
  if (t.device === canonicalDeviceName(device)) return t;
  const out = t.newEmpty(t.shape, { device });
  copyInto(out, t);
  return record(out, "ToCopyBackward", [t], (gy) => [toDevice(gy, t.device)], [], []);
}

/**
 * Sums a broadcast gradient back to `shape` (the shape before broadcasting): over extra leading
 * dimensions, and over dimensions that were 1. A fresh contiguous tensor.
 */
export function sumToShape(g: Tensor, shape: readonly number[]): Tensor {
  if (isHalf(g.dtype) && g.numel() !== shapeSize(shape)) {
    // The sum kernel reads f32: a half gradient sums in f32 and rounds once, as PyTorch's.
    const packed = contiguous(g);
    const wide = castFloat(packed, "f32");
    if (packed !== g) packed.dispose();
    const summed = sumToShape(wide, shape);
    wide.dispose();
    const out = castFloat(summed, g.dtype as HalfDType);
    summed.dispose();
    return out;
  }
  if (isHalf(g.dtype)) return contiguous(g).alias(shape); // nothing to sum: only a reshape
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
  if (current === src) return src.alias(shape);
  if (src !== g) src.dispose();
  return sameShape(current.shape, shape) ? current : current.alias(shape);
}
