/** View and layout ops: reshape, transpose, expand, contiguous, detach, clone. @module */

import { lib } from "../../../ffi/dtrain.ts";
import { record } from "../autograd.ts";
import { unwrap } from "../native.ts";
import {
  checkShape,
  contiguousStrides,
  copyInto,
  formatShape,
  normalizeDim,
  shapeSize,
  Tensor,
} from "../tensor.ts";
import { alias, sameShape } from "./_util.ts";
import { sumToShape } from "./reduce.ts";

/** A contiguous tensor with `t`'s elements: `t` itself when it already is (PyTorch semantics). */
export function contiguous(t: Tensor): Tensor {
  if (t.isContiguous()) return t;
  const out = Tensor.empty(t.shape, t.dtype);
  copyInto(out, t);
  return record(out, "ContiguousBackward", [t], (gy) => [alias(gy)], [], []);
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
  const out = alias(source, target, contiguousStrides(target));
  return record(
    out,
    "ReshapeBackward",
    [source],
    (gy) => [alias(gy, source.shape, contiguousStrides(source.shape))],
    [],
    [],
  );
}

/** A view with dimensions `dim0` and `dim1` swapped. */
export function transpose(t: Tensor, dim0: number, dim1: number): Tensor {
  const a = normalizeDim(dim0, t.ndim, "transpose"), b = normalizeDim(dim1, t.ndim, "transpose");
  if (t.ndim === 0) return identity(t);
  const shape = [...t.shape], strides = [...t.strides];
  [shape[a], shape[b]] = [shape[b], shape[a]];
  [strides[a], strides[b]] = [strides[b], strides[a]];
  const out = alias(t, shape, strides);
  return record(out, "TransposeBackward", [t], (gy) => [transposeView(gy, a, b)], [], []);
}

function transposeView(t: Tensor, a: number, b: number): Tensor {
  const shape = [...t.shape], strides = [...t.strides];
  [shape[a], shape[b]] = [shape[b], shape[a]];
  [strides[a], strides[b]] = [strides[b], strides[a]];
  return alias(t, shape, strides);
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
  const out = alias(t, target, strides);
  return record(out, "ExpandBackward", [t], (gy) => [sumToShape(gy, t.shape)], [], []);
}

/** A new tensor object for `t`'s memory that stays in the graph (an identity op). */
export function identity(t: Tensor): Tensor {
  return record(alias(t, t.shape, t.strides), "AliasBackward", [t], (gy) => [alias(gy)], [], []);
}

/** A tensor sharing `t`'s memory, cut from the graph. */
export function detach(t: Tensor): Tensor {
  return alias(t, t.shape, t.strides);
}

/** A contiguous copy of `t` that stays in the graph. */
export function clone(t: Tensor): Tensor {
  const out = Tensor.empty(t.shape, t.dtype);
  copyInto(out, t);
  return record(out, "CloneBackward", [t], (gy) => [alias(gy)], [], []);
}

/** Converts between f32 and i32 (a copy; truncation toward zero for f32 to i32). */
export function to(t: Tensor, dtype: "f32" | "i32"): Tensor {
  if (t.dtype === dtype) return t;
  const src = contiguous(t);
  const out = Tensor.empty(t.shape, dtype);
  unwrap(
    dtype === "f32"
      ? lib.dt_cast_i32_f32(src.ptr, out.ptr, t.numel())
      : lib.dt_cast_f32_i32(src.ptr, out.ptr, t.numel()),
  );
  if (src !== t) src.dispose();
  return out;
}
