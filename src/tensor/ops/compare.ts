/**
 * Comparisons (`eq`, `ne`, `lt`, `le`, `gt`, `ge`) giving bool tensors, the dtype promotion they
 * and the integer arithmetic share, and sums of i32 and bool tensors (a count of true elements:
 * an accuracy needs no `toArray`).
 * @module
 */

import { CompareOp, DTypeCode } from "../device/device.ts";
import {
  broadcastShapes,
  formatShape,
  isSuffix,
  normalizeDim,
  sameShape,
  shapeSize,
} from "../layout.ts";
import {
  type ComputeDType,
  type DType,
  type HalfDType,
  isFloat,
  isHalf,
  refuseStorageOnly,
} from "../dtype.ts";
import type { Tensor } from "../tensor.ts";
import { emptyOn, expectSameDevice } from "./_util.ts";
import { contiguous, expand, to } from "./shape.ts";
import { roundToHalf } from "./_half.ts";

/** The comparisons, by name. */
export type CompareName = keyof typeof CompareOp;

const RANK: Record<ComputeDType, number> = { bool: 0, i32: 1, f32: 2 };

/** The dtype a kernel takes for `dtype`: the 2-byte floats compute in f32 (exact for their values). */
function computeOf(dtype: DType): ComputeDType {
  return isHalf(dtype) ? "f32" : dtype as ComputeDType;
}

/**
 * The dtype two operands meet in for a kernel, as PyTorch promotes them (bool < i32 < f32; bf16
 * and f16 compare in f32, which holds their values exactly).
 *
 * @throws TypeError naming `op` for a u16 operand (storage only).
 */
export function promoteTypes(op: string, a: DType, b: DType): ComputeDType {
  refuseStorageOnly(op, a, b);
  const [x, y] = [computeOf(a), computeOf(b)];
  return RANK[x] >= RANK[y] ? x : y;
}

/** The dtype a number takes next to a tensor of `dtype` (a fraction makes integers f32). */
export function scalarType(op: string, dtype: DType, value: number): ComputeDType {
  refuseStorageOnly(op, dtype);
  if (isFloat(dtype) || !Number.isInteger(value)) return "f32";
  return dtype === "bool" ? "i32" : dtype as ComputeDType;
}

/** A one-element tensor holding `value`, on `like`'s device (it broadcasts as a repeat of 1). */
export function scalarOn(like: Tensor, value: number, dtype: ComputeDType): Tensor {
  const out = emptyOn(like, [], dtype);
  const dev = out.storage.backend;
  dev.check(
    dtype === "f32"
      ? dev.kernels.fillF32(out.ptr, 1, value)
      : dtype === "i32"
      ? dev.kernels.fillI32(out.ptr, 1, value)
      : dev.kernels.fillU8(out.ptr, 1, value ? 1 : 0),
  );
  return out;
}

/** A one-element f32 tensor holding `value` rounded to `dtype`. */
function roundedScalar(like: Tensor, value: number, dtype: HalfDType): Tensor {
  return scalarOn(like, roundToHalf(value, dtype), "f32");
}

/**
 * The operands of a broadcasting kernel: both converted to one dtype, and contiguous in a layout
 * the kernels repeat (the output's shape, a suffix of it, or one element). `release()` frees what
 * was made here.
 */
export function operands(
  op: string,
  a: Tensor,
  b: Tensor | number,
): { x: Tensor; y: Tensor; shape: number[]; dtype: ComputeDType; release: () => void } {
  const made: Tensor[] = [];
  const keep = (t: Tensor, original: Tensor) => {
    if (t !== original) made.push(t);
    return t;
  };
  let other: Tensor;
  let dtype: ComputeDType;
  refuseStorageOnly(op, a.dtype, typeof b === "number" ? "i32" : b.dtype);
  if (typeof b === "number") {
    dtype = scalarType(op, a.dtype, b);
    // A number compares in a half tensor's dtype (PyTorch casts it to the common dtype).
    other = keep(isHalf(a.dtype) ? roundedScalar(a, b, a.dtype) : scalarOn(a, b, dtype), a);
  } else {
    expectSameDevice(op, a, b);
    dtype = promoteTypes(op, a.dtype, b.dtype);
    other = b;
  }
  const shape = broadcastShapes(op, a.shape, other.shape);
  const fit = (t: Tensor) => {
    const typed = keep(to(t, dtype), t);
    const fits = sameShape(typed.shape, shape) || typed.numel() === 1 ||
      isSuffix(typed.shape, shape);
    const viewed = fits ? typed : keep(expand(typed, shape), typed);
    return keep(contiguous(viewed), viewed);
  };
  const x = fit(a), y = fit(other);
  return { x, y, shape, dtype, release: () => made.forEach((t) => t.dispose()) };
}

/** `a op b` elementwise with broadcasting, as a bool tensor (no gradient flows through it). */
export function compare(op: CompareName, a: Tensor, b: Tensor | number): Tensor {
  if (typeof b !== "number" && typeof b?.shape !== "object") {
    throw new TypeError(`${op}: other must be a tensor or a number, got ${typeof b}`);
  }
  const { x, y, shape, dtype, release } = operands(op, a, b);
  const out = emptyOn(x, shape, "bool");
  const dev = out.storage.backend;
  try {
    dev.check(
      dev.kernels.compare(
        CompareOp[op],
        DTypeCode[dtype],
        x.ptr,
        x.numel(),
        y.ptr,
        y.numel(),
        out.ptr,
        out.numel(),
      ),
    );
  } finally {
    release();
  }
  return out;
}

/**
 * The sum of an i32 or bool tensor's elements (all, or over `dim`), as i32: `eq(pred, y).sum()`
 * counts the matches. Saturates at the i32 range.
 */
export function sumInt(t: Tensor, dim?: number, keepdim = false): Tensor {
  refuseStorageOnly("sum", t.dtype);
  if (t.dtype === "f32") throw new TypeError("sumInt: expected an i32 or bool tensor, got f32");
  const src = contiguous(t);
  let outer = 1, axis = t.numel(), inner = 1;
  let outShape: number[] = keepdim ? t.shape.map(() => 1) : [];
  if (dim !== undefined) {
    const d = normalizeDim(dim, t.ndim, "sum");
    outer = shapeSize(t.shape.slice(0, d));
    axis = t.ndim === 0 ? 1 : t.shape[d];
    inner = shapeSize(t.shape.slice(d + 1));
    outShape = keepdim
      ? t.shape.map((s, i) => (i === d ? 1 : s))
      : t.shape.filter((_, i) => i !== d);
  }
  const out = emptyOn(src, outShape, "i32");
  const dev = out.storage.backend;
  dev.check(
    dev.kernels.sumAxisInt(
      src.ptr,
      DTypeCode[t.dtype as ComputeDType],
      out.ptr,
      outer,
      axis,
      inner,
    ),
  );
  if (src !== t) src.dispose();
  return out;
}

/** Throws unless `t` is a bool tensor (a mask), naming the op and what it got. */
export function expectBool(op: string, what: string, t: Tensor): void {
  if (t.dtype !== "bool") {
    throw new TypeError(
      `${op}: ${what} must be a bool tensor, got ${t.dtype} ${formatShape(t.shape)}`,
    );
  }
}

/**
 * `a == b` elementwise, broadcasting (PyTorch's `torch.eq`): a bool tensor. Summing it counts
 * the matches.
 *
 * @example Accuracy without leaving native memory
 * ```ts
 * import assert from "node:assert/strict";
 * import { eq, tensor } from "../../../mod.ts";
 * const pred = tensor([1, 0, 2, 2], [4], { dtype: "i32" });
 * const labels = tensor([1, 1, 2, 0], [4], { dtype: "i32" });
 * assert.equal(eq(pred, labels).sum().item(), 2);
 * ```
 */
export function eq(a: Tensor, b: Tensor | number): Tensor {
  return compare("eq", a, b);
}

/**
 * `a != b` elementwise, broadcasting (PyTorch's `torch.ne`): a bool tensor.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { ne, tensor } from "../../../mod.ts";
 * assert.deepStrictEqual(ne(tensor([1, 2]), 2).toArray(), new Uint8Array([1, 0]));
 * ```
 */
export function ne(a: Tensor, b: Tensor | number): Tensor {
  return compare("ne", a, b);
}

/**
 * `a < b` elementwise, broadcasting (PyTorch's `torch.lt`): a bool tensor.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { lt, tensor } from "../../../mod.ts";
 * assert.deepStrictEqual(lt(tensor([1, 2, 3]), 2).toArray(), new Uint8Array([1, 0, 0]));
 * ```
 */
export function lt(a: Tensor, b: Tensor | number): Tensor {
  return compare("lt", a, b);
}

/**
 * `a <= b` elementwise, broadcasting (PyTorch's `torch.le`): a bool tensor.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { le, tensor } from "../../../mod.ts";
 * assert.deepStrictEqual(le(tensor([1, 2, 3]), 2).toArray(), new Uint8Array([1, 1, 0]));
 * ```
 */
export function le(a: Tensor, b: Tensor | number): Tensor {
  return compare("le", a, b);
}

/**
 * `a > b` elementwise, broadcasting (PyTorch's `torch.gt`): a bool tensor.
 *
 * @example A column against a row
 * ```ts
 * import assert from "node:assert/strict";
 * import { gt, tensor } from "../../../mod.ts";
 * const m = gt(tensor([[1], [3]]), tensor([2, 0]));
 * assert.deepStrictEqual(m.tolist(), [[0, 1], [1, 1]]);
 * ```
 */
export function gt(a: Tensor, b: Tensor | number): Tensor {
  return compare("gt", a, b);
}

/**
 * `a >= b` elementwise, broadcasting (PyTorch's `torch.ge`): a bool tensor.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { ge, tensor } from "../../../mod.ts";
 * assert.deepStrictEqual(ge(tensor([1, 2, 3]), 2).toArray(), new Uint8Array([0, 1, 1]));
 * ```
 */
export function ge(a: Tensor, b: Tensor | number): Tensor {
  return compare("ge", a, b);
}
