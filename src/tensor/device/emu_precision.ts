/**
 * The precision of the emulated accelerator's matrix products, process-wide as a GPU's is (see
 * [Note: matmul precision] in csrc/cuda/matmul.cu): `"highest"` multiplies the f32 operands as
 * they are; `"high"` rounds each operand to TF32 (10-bit mantissa) and `"medium"` to bf16 (7-bit)
 * into a scratch copy, then multiplies with f32 accumulation and an f32 result, as the tensor
 * cores do. The products are the gemm kernels (matmul, batched matmul, linear forward and
 * backward) and attention, whose q, k, v and incoming gradient are rounded (the GPU also rounds
 * the probabilities inside it, which the CPU kernel underneath keeps in f32). Storage stays f32.
 * @module
 */

import type { KernelFunction, KernelSymbol } from "./kernels.ts";

/** PyTorch's names for the precision of f32 matrix products (`torch.set_float32_matmul_precision`). */
export type MatmulPrecisionName = "highest" | "high" | "medium";

/** Mantissa bits dropped by each precision (f32 keeps 23). */
const DROPPED: Record<MatmulPrecisionName, number> = { highest: 0, high: 13, medium: 16 };

let dropped = 0;
/** The rounded copies of the call in progress, kept reachable until it returns. */
const scratch: Uint32Array[] = [];

/**
 * Sets the precision of every later product on every emulated device.
 *
 * @param precision The precision.
 * @throws RangeError for another name.
 */
export function setEmuMatmulPrecision(precision: MatmulPrecisionName): void {
  if (!Object.hasOwn(DROPPED, precision)) {
    throw new RangeError(
      `emu.setMatmulPrecision: "${precision}" is not one of "highest", "high", "medium"`,
    );
  }
  dropped = DROPPED[precision];
}

/** The precision of products on the emulated devices. */
export function getEmuMatmulPrecision(): MatmulPrecisionName {
  return (Object.keys(DROPPED) as MatmulPrecisionName[]).find((p) => DROPPED[p] === dropped)!;
}

/** The `n` f32 values at `ptr`, rounded to nearest even at the current precision, in a copy. */
function rounded(ptr: Deno.PointerValue, n: number): Deno.PointerValue {
  if (ptr === null || n <= 0) return ptr;
  const bits = new Uint32Array(Deno.UnsafePointerView.getArrayBuffer(ptr, n * 4).slice(0));
  const half = (1 << (dropped - 1)) - 1, keep = ~((1 << dropped) - 1);
  for (let i = 0; i < n; i++) {
    const u = bits[i];
    // NaN and infinity keep their bits (rounding could carry a NaN's payload into infinity).
    if ((u & 0x7f800000) === 0x7f800000) continue;
    bits[i] = ((u + half + ((u >>> dropped) & 1)) & keep) >>> 0;
  }
  scratch.push(bits);
  return Deno.UnsafePointer.of(bits);
}

type Args = unknown[];
const P = (a: unknown) => a as Deno.PointerValue;
const N = (a: unknown) => Number(a);

/** Elements a row-major matrix of `rows` × `cols` with row stride `ld` spans. */
const span = (rows: number, cols: number, ld: number) =>
  rows === 0 || cols === 0 ? 0 : (rows - 1) * ld + cols;

/** For each product kernel: its arguments with the operands rounded (by their positions). */
const ROUNDERS: Partial<Record<KernelSymbol, (a: Args) => Args>> = {
  // (a, b, c, m, n, k, transA, transB, lda, ldb, ldc, alpha, beta)
  dt_matmul: (a) => {
    const [m, n, k, ta, tb, lda, ldb] = [3, 4, 5, 6, 7, 8, 9].map((i) => N(a[i]));
    const out = [...a];
    out[0] = rounded(P(a[0]), ta ? span(k, m, lda) : span(m, k, lda));
    out[1] = rounded(P(a[1]), tb ? span(n, k, ldb) : span(k, n, ldb));
    return out;
  },
  // (a, b, c, batch, strideA, strideB, strideC, m, n, k, ...)
  dt_matmul_batched: (a) => {
    const [batch, sa, sb, , m, n, k] = [3, 4, 5, 6, 7, 8, 9].map((i) => N(a[i]));
    const out = [...a];
    out[0] = rounded(P(a[0]), batch === 0 ? 0 : (batch - 1) * sa + m * k);
    out[1] = rounded(P(a[1]), batch === 0 ? 0 : (batch - 1) * sb + k * n);
    return out;
  },
  // (x, w, bias, y, rows, in, out, wTrans, ldw)
  dt_linear_forward: (a) => {
    const [rows, inF, outF, wt, ldw] = [4, 5, 6, 7, 8].map((i) => N(a[i]));
    const out = [...a];
    out[0] = rounded(P(a[0]), rows * inF);
    out[1] = rounded(P(a[1]), wt ? span(outF, inF, ldw) : span(inF, outF, ldw));
    return out;
  },
  // (gy, x, w, gx, gw, gbias, rows, in, out, wTrans, ldw): gbias is a sum, not a product.
  dt_linear_backward: (a) => {
    const [rows, inF, outF, wt, ldw] = [6, 7, 8, 9, 10].map((i) => N(a[i]));
    const out = [...a];
    out[0] = rounded(P(a[0]), rows * outF);
    out[1] = rounded(P(a[1]), rows * inF);
    out[2] = rounded(P(a[2]), wt ? span(outF, inF, ldw) : span(inF, outF, ldw));
    out[5] = null;
    return out;
  },
  // (q, k, v, mask, out, lse, layout, bh, heads, tq, tk, d, dv, ...): contiguous per layout.
  dt_attention_forward: (a) => roundAttention(a, [0, 1, 2], 7),
  // (q, k, v, mask, out, lse, gout, gq, gk, gv, layout, bh, heads, tq, tk, d, dv, ...)
  dt_attention_backward: (a) => roundAttention(a, [0, 1, 2, 6], 11),
};

/**
 * Attention's q, k, v (and gout) rounded: each a strided view whose element (bh, t, c) sits at
 * (bh / heads) * sb + (bh % heads) * sh + t * st + c, the strides three per tensor in `layout` in
 * the order q, k, v, out, gout (csrc/core/attention.c); the copy spans the view's extent.
 */
function roundAttention(a: Args, operands: number[], bhAt: number): Args {
  const [bh, heads, tq, tk, d, dv] = [0, 1, 2, 3, 4, 5].map((i) => N(a[bhAt + i]));
  const layout = a[bhAt - 1] as BigInt64Array;
  const out = [...a];
  // Layout slots of q, k, v, gout, with each one's rows and row length.
  const shapes: Record<number, [slot: number, rows: number, cols: number]> = {
    0: [0, tq, d],
    1: [1, tk, d],
    2: [2, tk, dv],
    6: [4, tq, dv],
  };
  for (const at of operands) {
    const [slot, rows, cols] = shapes[at];
    const [sb, sh, st] = [0, 1, 2].map((j) => Number(layout[3 * slot + j]));
    const extent = bh === 0 || rows === 0 || cols === 0
      ? 0
      : (bh / heads - 1) * sb + (heads - 1) * sh + (rows - 1) * st + cols;
    out[at] = rounded(P(a[at]), extent);
  }
  return out;
}

/**
 * `kernel` as the emulated device runs it: with its operands rounded when the precision is below
 * f32 and the kernel is a product, else unchanged.
 *
 * @param symbol The kernel's C name.
 * @param kernel The CPU kernel.
 * @returns The kernel to run.
 */
export function withMatmulPrecision(symbol: KernelSymbol, kernel: KernelFunction): KernelFunction {
  const rounder = ROUNDERS[symbol];
  if (rounder === undefined) return kernel;
  const call = kernel as unknown as (...args: unknown[]) => number;
  return ((...args: unknown[]) => {
    if (dropped === 0) return call(...args);
    let status: number;
    try {
      status = call(...rounder(args));
    } finally {
      scratch.length = 0;
    }
    if (symbol !== "dt_linear_backward" || args[5] === null || status !== 0) return status;
    // The bias gradient from the gradient as it is: a sum, which stays f32 on a GPU too.
    const biasOnly = [...args];
    biasOnly[3] = biasOnly[4] = null;
    return call(...biasOnly);
  }) as KernelFunction;
}
