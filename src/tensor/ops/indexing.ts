/**
 * Joining and indexing with autograd: `cat`, `stack`, `indexSelect`, `gather`, `where` and
 * `maskedFill`. Their backwards are slices of the gradient (cat), native index-add (indexSelect),
 * scatter-add (gather) and masked copies (where).
 * @module
 */

import { record } from "../autograd.ts";
import {
  broadcastShapes,
  formatShape,
  isSuffix,
  normalizeDim,
  sameShape,
  shapeSize,
} from "../layout.ts";
import { type ComputeDType, isFloat, itemSize, refuseStorageOnly } from "../dtype.ts";
import type { Tensor } from "../tensor.ts";
import { emptyOn, expectSameDevice, temporaries } from "./_util.ts";
import { expectBool, promoteTypes, scalarOn, scalarType } from "./compare.ts";
import { contiguous, expand, sumToShape, to } from "./shape.ts";
import { unsqueeze } from "./views.ts";
import { resultType, viaF32 } from "./_half.ts";

const int64s = (values: readonly number[]) => new BigInt64Array(values.map(BigInt));

/**
 * Concatenates tensors along `dim` (PyTorch's `torch.cat`): every shape equal except in `dim`.
 *
 * @param tensors The tensors, at least one, of one dtype and device.
 * @param dim The dimension to join along (negative counts from the end).
 * @returns A new contiguous tensor; its gradient is sliced back to each input.
 *
 * @example Joining rows
 * ```ts
 * import assert from "node:assert/strict";
 * import { cat, tensor } from "../../../mod.ts";
 * const c = cat([tensor([[1, 2]]), tensor([[3, 4], [5, 6]])], 0);
 * assert.deepStrictEqual(c.tolist(), [[1, 2], [3, 4], [5, 6]]);
 * ```
 */
export function cat(tensors: readonly Tensor[], dim = 0): Tensor {
  if (!Array.isArray(tensors) || tensors.length === 0) {
    throw new RangeError("cat: expected a non-empty list of tensors");
  }
  const first: Tensor = tensors[0];
  const d = normalizeDim(dim, first.ndim, "cat");
  if (first.ndim === 0) {
    throw new RangeError("cat: zero-dimensional tensor (entry 0) cannot be concatenated");
  }
  expectSameDevice("cat", ...tensors);
  const promoted = promoteFloats(tensors);
  if (promoted !== null) {
    const out = cat(promoted, dim);
    if (out.gradFn === null) promoted.forEach((t, i) => t !== tensors[i] && t.dispose());
    return out;
  }
  tensors.forEach((t, i) => {
    if (t.dtype !== first.dtype) {
      throw new TypeError(`cat: entry ${i} is ${t.dtype}, entry 0 is ${first.dtype}`);
    }
    if (
      t.ndim !== first.ndim ||
      t.shape.some((s: number, k: number) => k !== d && s !== first.shape[k])
    ) {
      throw new RangeError(
        `cat: sizes must match except in dimension ${d}: entry 0 is ${
          formatShape(first.shape)
        }, entry ${i} is ${formatShape(t.shape)}`,
      );
    }
  });
  const total = tensors.reduce((n, t) => n + t.shape[d], 0);
  const shape = first.shape.map((s: number, k: number) => (k === d ? total : s));
  const outer = shapeSize(first.shape.slice(0, d)), inner = shapeSize(first.shape.slice(d + 1));
  const bytes = itemSize(first.dtype);
  const out = emptyOn(first, shape, first.dtype);
  const dev = out.storage.backend;
  const starts: number[] = [];
  let start = 0;
  for (const t of tensors) {
    starts.push(start);
    const src = contiguous(t);
    const rowBytes = t.shape[d] * inner * bytes;
    if (rowBytes > 0 && outer > 0) {
      dev.check(dev.kernels.copyBlocks(
        src.ptr,
        Deno.UnsafePointer.offset(out.ptr!, start * inner * bytes),
        outer,
        rowBytes,
        rowBytes,
        total * inner * bytes,
      ));
    }
    if (src !== t) src.dispose();
    start += t.shape[d];
  }
  return record(
    out,
    "CatBackward",
    tensors,
    (gy) => tensors.map((t, i) => gy.alias(t.shape, gy.strides, gy.offset + starts[i] * inner)),
    [],
    [],
  );
}

/**
 * Stacks equal-shaped tensors along a new dimension `dim` (PyTorch's `torch.stack`).
 *
 * @param tensors The tensors, at least one, of one shape, dtype and device.
 * @param dim Where the new dimension goes (0 to ndim; negative counts from the end).
 * @returns A new contiguous tensor with one more dimension.
 *
 * @example Two vectors as rows
 * ```ts
 * import assert from "node:assert/strict";
 * import { stack, tensor } from "../../../mod.ts";
 * const s = stack([tensor([1, 2]), tensor([3, 4])], 1);
 * assert.deepStrictEqual(s.tolist(), [[1, 3], [2, 4]]);
 * ```
 */
export function stack(tensors: readonly Tensor[], dim = 0): Tensor {
  if (!Array.isArray(tensors) || tensors.length === 0) {
    throw new RangeError("stack: expected a non-empty list of tensors");
  }
  tensors.forEach((t, i) => {
    if (!sameShape(t.shape, tensors[0].shape)) {
      throw new RangeError(
        `stack: expects each tensor to be equal size, but got ${
          formatShape(tensors[0].shape)
        } at entry 0 and ${formatShape(t.shape)} at entry ${i}`,
      );
    }
  });
  const d = normalizeDim(dim, tensors[0].ndim + 1, "stack");
  return cat(tensors.map((t) => unsqueeze(t, d)), d);
}

/** Throws unless `index` is an i32 tensor, naming the op. */
function expectIndex(op: string, index: Tensor): void {
  if (index.dtype !== "i32") {
    throw new TypeError(
      `${op}: index must be an i32 tensor, got ${index.dtype} ${formatShape(index.shape)}`,
    );
  }
}

/**
 * The slices of `t` along `dim` at the positions in a 1-d i32 `index` (PyTorch's
 * `torch.index_select`); positions may repeat.
 *
 * @example Rows 2 and 0
 * ```ts
 * import assert from "node:assert/strict";
 * import { indexSelect, tensor } from "../../../mod.ts";
 * const x = tensor([[1, 2], [3, 4], [5, 6]]);
 * const rows = indexSelect(x, 0, tensor([2, 0], [2], { dtype: "i32" }));
 * assert.deepStrictEqual(rows.tolist(), [[5, 6], [1, 2]]);
 * ```
 */
export function indexSelect(t: Tensor, dim: number, index: Tensor): Tensor {
  const half = viaF32("indexSelect", [t], (x) => indexSelect(x, dim, index));
  if (half) return half;
  expectIndex("indexSelect", index);
  if (index.ndim > 1) {
    throw new RangeError(`indexSelect: index must be 0-d or 1-d, got ${formatShape(index.shape)}`);
  }
  refuseStorageOnly("indexSelect", t.dtype);
  if (t.dtype === "bool") {
    throw new TypeError('indexSelect: bool input is not supported; convert it with .to("i32")');
  }
  expectSameDevice("indexSelect", t, index);
  const d = normalizeDim(dim, t.ndim, "indexSelect");
  const src = contiguous(t), idx = contiguous(index);
  const axis = t.ndim === 0 ? 1 : t.shape[d], n = index.numel();
  const outer = shapeSize(t.shape.slice(0, d)), inner = shapeSize(t.shape.slice(d + 1));
  const out = emptyOn(src, t.ndim === 0 ? [] : t.shape.map((s, k) => (k === d ? n : s)), t.dtype);
  const dev = out.storage.backend;
  dev.check(dev.kernels.indexSelect(src.ptr, idx.ptr, n, out.ptr, outer, axis, inner));
  return record(
    out,
    "IndexSelectBackward",
    [src],
    (gy) => {
      const gx = emptyOn(src, src.shape, "f32", true);
      dev.check(dev.kernels.indexAdd(gy.ptr, idx.ptr, n, gx.ptr, outer, axis, inner));
      return [gx];
    },
    temporaries([src, t], [idx, index]),
    [],
  );
}

/**
 * Values of `t` picked along `dim` by an i32 `index` of the same rank (PyTorch's `torch.gather`):
 * `out[i][j] = t[i][index[i][j]]` for `dim = 1`. The output has the index's shape.
 *
 * @example The chosen class of each row
 * ```ts
 * import assert from "node:assert/strict";
 * import { gather, tensor } from "../../../mod.ts";
 * const scores = tensor([[0.1, 0.9], [0.7, 0.3]]);
 * const picked = gather(scores, 1, tensor([[1], [0]], undefined, { dtype: "i32" }));
 * assert.deepStrictEqual(picked.toArray(), new Float32Array([0.9, 0.7]));
 * ```
 */
export function gather(t: Tensor, dim: number, index: Tensor): Tensor {
  const half = viaF32("gather", [t], (x) => gather(x, dim, index));
  if (half) return half;
  expectIndex("gather", index);
  refuseStorageOnly("gather", t.dtype);
  if (t.dtype === "bool") {
    throw new TypeError('gather: bool input is not supported; convert it with .to("i32")');
  }
  expectSameDevice("gather", t, index);
  if (index.ndim !== t.ndim) {
    throw new RangeError(
      `gather: index ${formatShape(index.shape)} must have as many dimensions as the input ${
        formatShape(t.shape)
      }`,
    );
  }
  const d = normalizeDim(dim, t.ndim, "gather");
  const src = contiguous(t), idx = contiguous(index);
  // A 0-d gather is a 1-d one of one element.
  const xshape = int64s(t.ndim === 0 ? [1] : t.shape),
    ishape = int64s(t.ndim === 0 ? [1] : index.shape);
  const ndim = Math.max(t.ndim, 1);
  const out = emptyOn(src, index.shape, t.dtype);
  const dev = out.storage.backend;
  dev.check(dev.kernels.gather(src.ptr, xshape, idx.ptr, ishape, ndim, d, out.ptr));
  return record(
    out,
    "GatherBackward",
    [src],
    (gy) => {
      const gx = emptyOn(src, src.shape, "f32", true);
      dev.check(dev.kernels.scatterAdd(gy.ptr, xshape, idx.ptr, ishape, ndim, d, gx.ptr));
      return [gx];
    },
    temporaries([src, t], [idx, index]),
    [],
  );
}

/** cond ? x : y with broadcasting, recorded under `name` (where and maskedFill share it). */
function select(name: string, op: string, cond: Tensor, x: Tensor, y: Tensor): Tensor {
  expectBool(op, "condition", cond);
  expectSameDevice(op, cond, x, y);
  if (x.dtype === "bool" || y.dtype === "bool") {
    throw new TypeError(`${op}: bool values are not supported; convert them with .to("i32")`);
  }
  const dtype = promoteTypes(op, x.dtype, y.dtype);
  const shape = broadcastShapes(op, broadcastShapes(op, cond.shape, x.shape), y.shape);
  const made: Tensor[] = [];
  const fit = (t: Tensor, wanted = t.dtype) => {
    let cur = t;
    const step = (next: Tensor) => {
      if (next !== cur) made.push(next);
      cur = next;
    };
    step(to(cur, wanted));
    // The kernel repeats a scalar or a suffix of the output's shape; anything else is expanded.
    if (!(sameShape(cur.shape, shape) || cur.numel() === 1 || isSuffix(cur.shape, shape))) {
      step(expand(cur, shape));
    }
    step(contiguous(cur));
    return cur;
  };
  const c = fit(cond), a = fit(x, dtype), b = fit(y, dtype);
  const out = emptyOn(c, shape, dtype);
  const dev = out.storage.backend;
  const n = out.numel();
  dev.check(dev.kernels.where(c.ptr, c.numel(), a.ptr, a.numel(), b.ptr, b.numel(), out.ptr, n));
  // The node owns the final copies. An intermediate outside the graph is freed now; one inside
  // it is an input of a node (ExpandBackward's), freed with the graph or by tidy.
  for (const t of made) if (t !== c && t !== a && t !== b && !t.requiresGrad) t.dispose();
  return record(
    out,
    name,
    [a, b],
    (gy) => {
      const ga = a.requiresGrad ? emptyOn(a, shape) : null;
      const gb = b.requiresGrad ? emptyOn(b, shape) : null;
      const [pa, pb] = [ga?.ptr ?? null, gb?.ptr ?? null];
      dev.check(dev.kernels.whereBackward(c.ptr, c.numel(), gy.ptr, pa, pb, n));
      // A repeated operand's gradient sums over its repeats.
      const fold = (g: Tensor | null, t: Tensor) => {
        if (g === null || sameShape(g.shape, t.shape)) return g;
        const folded = sumToShape(g, t.shape);
        if (folded !== g) g.dispose();
        return folded;
      };
      return [fold(ga, a), fold(gb, b)];
    },
    [c, a, b].filter((t) => made.includes(t)),
    [],
  );
}

/**
 * Elements of `x` where `condition` is true, else of `y` (PyTorch's `torch.where`), all three
 * broadcast together; `x` or `y` may be numbers. Gradients flow to `x` and `y` through the mask.
 *
 * @example ReLU by hand
 * ```ts
 * import assert from "node:assert/strict";
 * import { tensor, where } from "../../../mod.ts";
 * const x = tensor([-1, 2, -3, 4]);
 * assert.deepStrictEqual(where(x.gt(0), x, 0).toArray(), new Float32Array([0, 2, 0, 4]));
 * ```
 */
export function where(condition: Tensor, x: Tensor | number, y: Tensor | number): Tensor {
  // 2-byte values pass through f32 (exactly); a number next to a half tensor rounds to its dtype.
  const half = viaF32(
    "where",
    [typeof x === "number" ? null : x, typeof y === "number" ? null : y],
    (a, b) => where(condition, a ?? (x as number), b ?? (y as number)),
  );
  if (half) return half;
  const like = typeof x === "number" ? (typeof y === "number" ? null : y) : x;
  const dtypeOf = (v: number) => like === null ? "f32" : scalarType("where", like.dtype, v);
  const xt = typeof x === "number" ? scalarOn(condition, x, dtypeOf(x)) : x;
  const yt = typeof y === "number" ? scalarOn(condition, y, dtypeOf(y)) : y;
  return select("WhereBackward", "where", condition, xt, yt);
}

/**
 * `t` with `value` written where the bool `mask` (broadcast to `t`'s shape) is true (PyTorch's
 * `masked_fill`); the gradient flows to `t` where the mask is false.
 *
 * @example A causal mask
 * ```ts
 * import assert from "node:assert/strict";
 * import { maskedFill, ones, tensor } from "../../../mod.ts";
 * const scores = tensor([[1, 2], [3, 4]]);
 * const future = ones([2, 2]).triu(1).to("bool");
 * const masked = maskedFill(scores, future, -Infinity);
 * assert.deepStrictEqual(masked.tolist(), [[1, -Infinity], [3, 4]]);
 * ```
 */
export function maskedFill(t: Tensor, mask: Tensor, value: number): Tensor {
  expectBool("maskedFill", "mask", mask);
  if (typeof value !== "number") {
    throw new TypeError(`maskedFill: value must be a number, got ${typeof value}`);
  }
  const shape = broadcastShapes("maskedFill", t.shape, mask.shape);
  if (!sameShape(shape, t.shape)) {
    throw new RangeError(
      `maskedFill: mask ${formatShape(mask.shape)} does not broadcast to the input's shape ${
        formatShape(t.shape)
      }`,
    );
  }
  refuseStorageOnly("maskedFill", t.dtype);
  const half = viaF32("maskedFill", [t], (x) => maskedFill(x, mask, value));
  if (half) return half;
  const fill = scalarOn(t, value, t.dtype as ComputeDType);
  return select("MaskedFillBackward", "maskedFill", mask, fill, t);
}

/**
 * The tensors converted to their promoted dtype when they mix floating-point dtypes (PyTorch's
 * cat promotes: bf16 with f32 is f32), differentiably; null when there is nothing to convert.
 */
function promoteFloats(tensors: readonly Tensor[]): Tensor[] | null {
  const dtypes = new Set(tensors.map((t) => t.dtype));
  if (dtypes.size === 1 || ![...dtypes].every(isFloat)) return null;
  const dtype = resultType(...tensors);
  return tensors.map((t) => to(t, dtype));
}
