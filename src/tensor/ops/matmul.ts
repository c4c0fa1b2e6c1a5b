/**
 * Matrix products on cblas_sgemm, and `linear` (x @ W^T + b) fused like PyTorch's addmm. Operands
 * that are transposed views are handed to sgemm with a transpose flag instead of being copied.
 * @module
 */

import { record } from "../autograd.ts";
import { broadcastShapes, formatShape, sameShape, shapeSize } from "../layout.ts";
import type { Tensor } from "../tensor.ts";
import { emptyOn, expectF32, expectSameDevice } from "./_util.ts";
import { contiguous, expand, reshape } from "./shape.ts";
import { viaF32 } from "./_half.ts";
import { linearBf16 } from "./linear_bf16.ts";

/** A 2-d operand as sgemm sees it: its memory, whether it is transposed, and its leading dimension. */
interface Operand {
  t: Tensor;
  trans: boolean;
  ld: number;
}

/** A 2-d tensor as an sgemm operand, copying only when neither layout fits. */
function operand(t: Tensor): Operand {
  const [rows, cols] = t.shape;
  const [rs, cs] = t.strides;
  if (cs === 1 && (rs >= cols || rows <= 1)) return { t, trans: false, ld: Math.max(rs, cols, 1) };
  if (rs === 1 && (cs >= rows || cols <= 1)) return { t, trans: true, ld: Math.max(cs, rows, 1) };
  return { t: contiguous(t), trans: false, ld: Math.max(cols, 1) };
}

/** c = alpha * op(a) @ op(b) + beta * c for 2-d operands. */
function gemm(a: Operand, b: Operand, c: Tensor, m: number, n: number, k: number, beta = 0): void {
  const dev = c.storage.backend;
  dev.check(
    dev.kernels.matmul(
      a.t.ptr,
      b.t.ptr,
      c.ptr,
      m,
      n,
      k,
      a.trans ? 1 : 0,
      b.trans ? 1 : 0,
      a.ld,
      b.ld,
      Math.max(n, 1),
      1,
      beta,
    ),
  );
}

/** The transpose of an operand, as an operand (no copy). */
function transposed(o: Operand): Operand {
  return { t: o.t, trans: !o.trans, ld: o.ld };
}

/** The product of two 2-d matrices with autograd. */
function matmul2d(a: Tensor, b: Tensor): Tensor {
  const [m, k] = a.shape;
  const [k2, n] = b.shape;
  if (k !== k2) {
    throw new RangeError(
      `matmul: shapes ${formatShape(a.shape)} and ${
        formatShape(b.shape)
      } cannot be multiplied (${k} != ${k2})`,
    );
  }
  const A = operand(a), B = operand(b);
  const out = emptyOn(a, [m, n]);
  gemm(A, B, out, m, n, k);
  return record(out, "MmBackward", [A.t, B.t], (gy) => {
    const G: Operand = { t: gy, trans: false, ld: Math.max(n, 1) };
    let ga: Tensor | null = null, gb: Tensor | null = null;
    if (A.t.requiresGrad) {
      ga = emptyOn(gy, [m, k]);
      gemm(G, transposed(B), ga, m, k, n);
    }
    if (B.t.requiresGrad) {
      gb = emptyOn(gy, [k, n]);
      gemm(transposed(A), G, gb, k, n, m);
    }
    return [ga, gb];
  });
}

/**
 * Matrix product with PyTorch's `matmul` rules: 1-d @ 1-d is a dot product; a 1-d operand is a
 * row (left) or column (right) vector whose dimension is dropped from the result; n-d operands
 * are stacks of matrices whose leading (batch) dimensions broadcast, and their gradients are
 * summed back over the broadcast dimensions.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { ones, tensor } from "../../../mod.ts";
 * const a = ones([2, 1, 3, 4]), b = ones([5, 4, 2]);
 * assert.deepEqual(a.matmul(b).shape, [2, 5, 3, 2]);
 * assert.equal(tensor([1, 2, 3]).matmul(tensor([4, 5, 6])).item(), 32);
 * assert.deepEqual(ones([3, 4]).matmul(ones([4])).shape, [3]);
 * ```
 */
export function matmul(a: Tensor, b: Tensor): Tensor {
  const half = viaF32("matmul", [a, b], matmul);
  if (half) return half;
  expectF32("matmul", a, b);
  expectSameDevice("matmul", a, b);
  if (a.ndim === 0 || b.ndim === 0) {
    throw new RangeError(
      `matmul: both arguments need at least 1 dimension, got ${formatShape(a.shape)} and ${
        formatShape(b.shape)
      }`,
    );
  }
  if (a.ndim === 2 && b.ndim === 2) return matmul2d(a, b);
  // 1-d operands become [1, k] and [k, 1]; their dimension is dropped from the result.
  const A = a.ndim === 1 ? reshape(a, [1, a.shape[0]]) : a;
  const B = b.ndim === 1 ? reshape(b, [b.shape[0], 1]) : b;
  const [m, k] = A.shape.slice(-2), [k2, n] = B.shape.slice(-2);
  if (k !== k2) {
    throw new RangeError(
      `matmul: shapes ${formatShape(a.shape)} and ${
        formatShape(b.shape)
      } cannot be multiplied (${k} != ${k2})`,
    );
  }
  const batch = batchShape(a, b, A.shape.slice(0, -2), B.shape.slice(0, -2));
  let out: Tensor;
  if (B.ndim === 2) {
    // A stack of matrices times one matrix: a single sgemm over all rows.
    out = reshape(matmul2d(reshape(A, [shapeSize(batch) * m, k]), B), [...batch, m, n]);
  } else {
    // Broadcast batch dimensions are expanded (the expand's backward sums the gradient back).
    const fit = (t: Tensor, rows: number, cols: number) => {
      const full = [...batch, rows, cols];
      return reshape(sameShape(t.shape, full) ? t : expand(t, full), [
        shapeSize(batch),
        rows,
        cols,
      ]);
    };
    out = reshape(bmm(fit(A, m, k), fit(B, k, n)), [...batch, m, n]);
  }
  const shape = [...batch, ...(a.ndim === 1 ? [] : [m]), ...(b.ndim === 1 ? [] : [n])];
  return sameShape(out.shape, shape) ? out : reshape(out, shape);
}

/** The broadcast of two batch shapes, or an error naming both operands' full shapes. */
function batchShape(a: Tensor, b: Tensor, batchA: number[], batchB: number[]): number[] {
  try {
    return broadcastShapes("matmul", batchA, batchB);
  } catch {
    throw new RangeError(
      `matmul: the batch dimensions of ${formatShape(a.shape)} and ${
        formatShape(b.shape)
      } cannot be broadcast together (${formatShape(batchA)} and ${formatShape(batchB)})`,
    );
  }
}

/** Batched product [B, M, K] @ [B, K, N] on contiguous copies. */
function bmm(a: Tensor, b: Tensor): Tensor {
  const [batch, m, k] = a.shape;
  const [, k2, n] = b.shape;
  if (k !== k2) {
    throw new RangeError(
      `matmul: shapes ${formatShape(a.shape)} and ${formatShape(b.shape)} cannot be multiplied`,
    );
  }
  const x = contiguous(a), y = contiguous(b);
  const out = emptyOn(x, [batch, m, n]);
  const dev = out.storage.backend;
  dev.check(
    dev.kernels.matmulBatched(
      x.ptr,
      y.ptr,
      out.ptr,
      batch,
      m * k,
      k * n,
      m * n,
      m,
      n,
      k,
      0,
      0,
      1,
      0,
    ),
  );
  return record(out, "BmmBackward", [x, y], (gy) => {
    const ga = x.requiresGrad ? emptyOn(x, x.shape) : null;
    const gb = y.requiresGrad ? emptyOn(y, y.shape) : null;
    if (ga) {
      dev.check(
        dev.kernels.matmulBatched(
          gy.ptr,
          y.ptr,
          ga.ptr,
          batch,
          m * n,
          k * n,
          m * k,
          m,
          k,
          n,
          0,
          1,
          1,
          0,
        ),
      );
    }
    if (gb) {
      dev.check(
        dev.kernels.matmulBatched(
          x.ptr,
          gy.ptr,
          gb.ptr,
          batch,
          m * k,
          m * n,
          k * n,
          k,
          n,
          m,
          1,
          0,
          1,
          0,
        ),
      );
    }
    return [ga, gb];
  });
}

/**
 * y = x @ weight^T + bias for x of shape [*, in], weight [out, in], bias [out] (PyTorch's
 * `F.linear`). One native call each way: the forward writes the bias and sgemm accumulates onto it,
 * so no separate add runs; the backward computes the input and weight gradients side by side on
 * the thread pool, and the bias gradient.
 */
export function linear(x: Tensor, weight: Tensor, bias?: Tensor | null): Tensor {
  checkLinear(x, weight, bias);
  const half = viaF32("linear", [x, weight, bias], linear, undefined, false, linearBf16);
  if (half) return half;
  expectF32("linear", x, weight, ...(bias ? [bias] : []));
  const [outFeatures, inFeatures] = weight.shape;
  const lead = x.shape.slice(0, -1);
  const rows = shapeSize(lead);
  const X = contiguous(x), W = operand(weight), B = bias ? contiguous(bias) : null;
  const out = emptyOn(X, [...lead, outFeatures]);
  const dev = out.storage.backend;
  const wTrans = W.trans ? 1 : 0;
  dev.check(
    dev.kernels.linearForward(
      X.ptr,
      W.t.ptr,
      B?.ptr ?? null,
      out.ptr,
      rows,
      inFeatures,
      outFeatures,
      wTrans,
      W.ld,
    ),
  );
  const inputs = B ? [X, W.t, B] : [X, W.t];
  return record(out, "AddmmBackward", inputs, (gy) => {
    const gx = X.requiresGrad ? emptyOn(X, X.shape) : null;
    const gw = W.t.requiresGrad ? emptyOn(X, [outFeatures, inFeatures]) : null;
    const gb = B?.requiresGrad ? emptyOn(X, [outFeatures]) : null;
    dev.check(
      dev.kernels.linearBackward(
        gy.ptr,
        X.ptr,
        W.t.ptr,
        gx?.ptr ?? null,
        gw?.ptr ?? null,
        gb?.ptr ?? null,
        rows,
        inFeatures,
        outFeatures,
        wTrans,
        W.ld,
      ),
    );
    return [gx, gw, gb];
  });
}

/** linear's shape and device checks, before any dtype's path. */
function checkLinear(x: Tensor, weight: Tensor, bias?: Tensor | null): void {
  expectSameDevice("linear", x, weight, ...(bias ? [bias] : []));
  if (weight.ndim !== 2 || x.ndim < 1 || x.shape[x.ndim - 1] !== weight.shape[1]) {
    throw new RangeError(
      `linear: input ${formatShape(x.shape)} does not match weight ${formatShape(weight.shape)}`,
    );
  }
  const outFeatures = weight.shape[0];
  if (bias && (bias.ndim !== 1 || bias.shape[0] !== outFeatures)) {
    throw new RangeError(
      `linear: bias ${formatShape(bias.shape)} does not match ${outFeatures} output features`,
    );
  }
}
