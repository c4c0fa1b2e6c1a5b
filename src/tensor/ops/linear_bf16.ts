/**
 * `linear` on bf16 operands through the bf16 product kernel (`matmulBf16`, csrc/core/matmul_bf16.c):
 * oneDNN's bf16 matmul where the CPU has bf16 instructions, cuBLAS's on a GPU, else sgemm of the
 * converted panels, the f32 products of bf16 values. Each product accumulates in f32 and rounds
 * once to bf16, as [Note: half compute] has every op do; what this path saves against the
 * generic one is the f32 copies of the operands (the weight's alone is 4 bytes an element that a
 * recorded graph would keep alive until backward).
 * @module
 */

import { record } from "../autograd.ts";
import { BinaryOp, DTypeCode } from "../device/device.ts";
import { shapeSize } from "../layout.ts";
import type { Tensor } from "../tensor.ts";
import { emptyOn, temporaries } from "./_util.ts";
import { sum } from "./reduce.ts";
import { contiguous, reshape, to } from "./shape.ts";

/**
 * `x @ weight^T + bias` for bf16 `x` [*, in], `weight` [out, in] and `bias` [out] (shapes and
 * devices already checked), with its backward through the same kernel.
 */
export function linearBf16(x: Tensor, weight: Tensor, bias?: Tensor | null): Tensor {
  const [outFeatures, inFeatures] = weight.shape;
  const lead = x.shape.slice(0, -1);
  const rows = shapeSize(lead);
  const X = contiguous(x), W = contiguous(weight), B = bias ? contiguous(bias) : null;
  const dev = X.storage.backend;
  // y = x @ w^T in f32, plus the bias (widened) row by row, rounded once.
  const wide = emptyOn(X, [rows, outFeatures]);
  let out: Tensor;
  try {
    product(X, W, wide, rows, outFeatures, inFeatures, 0, 1);
    if (B) {
      const b = emptyOn(X, [outFeatures]);
      try {
        dev.check(dev.kernels.castHalfF32(B.ptr, DTypeCode.bf16, b.ptr, outFeatures));
        const n = rows * outFeatures;
        dev.check(dev.kernels.binary(BinaryOp.add, wide.ptr, n, b.ptr, outFeatures, wide.ptr, n));
      } finally {
        b.dispose();
      }
    }
    out = emptyOn(X, [...lead, outFeatures], "bf16");
    dev.check(dev.kernels.castF32Half(wide.ptr, out.ptr, rows * outFeatures, DTypeCode.bf16));
  } finally {
    wide.dispose();
  }
  const inputs = B ? [X, W, B] : [X, W];
  return record(
    out,
    "AddmmBackward",
    inputs,
    (gy) => {
      const G = gy.dtype === "bf16" ? contiguous(gy) : to(contiguous(gy), "bf16");
      // gx [rows, in] = gy [rows, out] @ w [out, in]; gw [out, in] = gy^T @ x [rows, in].
      const gx = X.requiresGrad ? rounded(G, W, X.shape, rows, inFeatures, outFeatures, 0) : null;
      const gw = W.requiresGrad ? rounded(G, X, W.shape, outFeatures, inFeatures, rows, 1) : null;
      const gb = B?.requiresGrad ? sum(reshape(G, [rows, outFeatures]), 0) : null;
      if (G !== gy) G.dispose();
      return [gx, gw, gb];
    },
    temporaries([X, x], [W, weight], ...(B && bias ? [[B, bias] as [Tensor, Tensor]] : [])),
  );
}

/** c [m, n] (f32) = op(a) @ op(b) of contiguous bf16 matrices, `k` deep. */
function product(
  a: Tensor,
  b: Tensor,
  c: Tensor,
  m: number,
  n: number,
  k: number,
  transA: number,
  transB: number,
): void {
  const dev = c.storage.backend;
  const lda = Math.max(transA ? m : k, 1), ldb = Math.max(transB ? k : n, 1);
  dev.check(
    dev.kernels.matmulBf16(
      a.ptr,
      b.ptr,
      c.ptr,
      1,
      0,
      0,
      0,
      m,
      n,
      k,
      transA,
      transB,
      lda,
      ldb,
      Math.max(n, 1),
      1,
      0,
    ),
  );
}

/** The bf16 product op(a) @ b [m, n] `k` deep, rounded once from f32, as a tensor of `shape`. */
function rounded(
  a: Tensor,
  b: Tensor,
  shape: readonly number[],
  m: number,
  n: number,
  k: number,
  transA: number,
): Tensor {
  const wide = emptyOn(a, [m, n]);
  try {
    product(a, b, wide, m, n, k, transA, 0);
    const out = emptyOn(a, shape, "bf16");
    const dev = out.storage.backend;
    dev.check(dev.kernels.castF32Half(wide.ptr, out.ptr, m * n, DTypeCode.bf16));
    return out;
  } finally {
    wide.dispose();
  }
}
