/**
 * Scaled dot-product attention with one fused native kernel each way (csrc/core/attention.c):
 * the forward keeps only each query row's log-sum-exp, and the backward recomputes the
 * probabilities from it, so the memory saved for backward grows with T, not T².
 * @module
 */

import { record } from "../autograd.ts";
import { formatShape, sameShape, shapeSize } from "../layout.ts";
import { nextRandomOffset, randomSeed } from "../random.ts";
import type { Tensor } from "../tensor.ts";
import type { DeviceBackend } from "../device/device.ts";
import { emptyOn, expectF32, expectSameDevice, temporaries } from "./_util.ts";
import { resultType, viaF32 } from "./_half.ts";
import { contiguous, expand } from "./shape.ts";

/** Options of {@linkcode scaledDotProductAttention} (PyTorch's keyword arguments). */
export interface AttentionOptions {
  /**
   * Added to the scores before the softmax: an f32 tensor broadcastable to `[..., Tq, Tk]` (use
   * `-Infinity` to mask a position out).
   */
  attnMask?: Tensor | null;
  /** Dropout probability on the attention weights (only pass it while training; default 0). */
  dropoutP?: number;
  /** Query i attends to keys j <= i (top-left aligned, as PyTorch's `is_causal`). */
  isCausal?: boolean;
  /** Multiplies the scores; default 1 / sqrt(head size). */
  scale?: number;
}

/** Strides of one tensor as the kernel reads it: per batch, per head, per row (in elements). */
type HeadStrides = [number, number, number];

/**
 * The strides that address `x` [...lead, T, D] as [(batch, head), T, D] with adjacent elements in
 * a row, or null when its layout does not allow it (then it is copied): the leading dimensions
 * before the last (the heads) must collapse into one batch stride.
 */
function headStrides(x: Tensor, lead: readonly number[]): HeadStrides | null {
  const n = lead.length;
  if (x.shape[n + 1] > 1 && x.strides[n + 1] !== 1) return null;
  const row = x.strides[n];
  if (n === 0) return [0, 0, row];
  const head = x.strides[n - 1];
  let batch = 0;
  for (let dim = n - 2; dim >= 0; dim--) {
    if (lead[dim] === 1) continue;
    const inner = lead.slice(dim + 1, n - 1).reduce((a, b) => a * b, 1);
    if (batch === 0) batch = x.strides[dim] / Math.max(inner, 1);
    if (!Number.isInteger(batch) || x.strides[dim] !== batch * inner) return null;
  }
  return [batch, head, row];
}

/** The kernel's `layout`: q, k, v, out, gout, gq, gk, gv strides (zeros where absent), then the mask's. */
function packLayout(
  strides: (HeadStrides | null)[],
  mask: { strideB: number; strideH: number } | null,
): BigInt64Array {
  const layout = new BigInt64Array(26);
  strides.forEach((s, i) => s?.forEach((v, j) => (layout[3 * i + j] = BigInt(v))));
  layout[24] = BigInt(mask?.strideB ?? 0);
  layout[25] = BigInt(mask?.strideH ?? 0);
  return layout;
}

/**
 * The mask as the kernel reads it: `[bh]` blocks of `[Tq, Tk]` indexed (b / heads) * strideB +
 * (b % heads) * strideH. Broadcast masks keep stride 0 (no copy) when their layout allows.
 */
function maskLayout(
  mask: Tensor,
  lead: readonly number[],
  tq: number,
  tk: number,
): { mask: Tensor; strideB: number; strideH: number } {
  let m = expand(mask, [...lead, tq, tk]);
  const n = lead.length;
  const rowsContiguous = m.strides[n + 1] === 1 && (tq === 1 || m.strides[n] === tk);
  const heads = n === 0 ? 1 : lead[n - 1];
  const strideH = n === 0 ? 0 : m.strides[n - 1];
  // The dimensions before the last leading one must collapse to one stride.
  let strideB = 0, collapses = true;
  for (let d = n - 2; d >= 0; d--) {
    if (lead[d] === 1) continue;
    if (strideB === 0 && m.strides[d] === 0) continue;
    const inner = lead.slice(d + 1, n - 1).reduce((a, b) => a * b, 1);
    const expected = strideB === 0 ? m.strides[d] : strideB * inner;
    if (strideB === 0) strideB = m.strides[d] / Math.max(inner, 1);
    if (m.strides[d] !== expected || !Number.isInteger(strideB)) collapses = false;
  }
  if (rowsContiguous && collapses) return { mask: m, strideB, strideH };
  const packed = contiguous(m);
  if (packed !== m) m.dispose();
  m = packed;
  return { mask: m, strideB: heads * tq * tk, strideH: tq * tk };
}

/** One attention problem as the kernels take it: sizes, scale, masking and dropout. */
interface Problem {
  bh: number;
  heads: number;
  tq: number;
  tk: number;
  d: number;
  dv: number;
  scale: number;
  causal: boolean;
  dropoutP: number;
  seed: bigint;
  offset: bigint;
}

type Ptr = Deno.PointerValue;

/** Runs the forward kernel on `p`; out and lse are written. */
function forwardKernel(
  dev: DeviceBackend,
  p: Problem,
  [q, k, v, mask, out, lse]: Ptr[],
  layout: BigInt64Array,
): void {
  dev.check(dev.kernels.attentionForward(
    q,
    k,
    v,
    mask,
    out,
    lse,
    layout,
    p.bh,
    p.heads,
    p.tq,
    p.tk,
    p.d,
    p.dv,
    p.scale,
    p.causal ? 1 : 0,
    p.dropoutP,
    p.seed,
    p.offset,
  ));
}

/** Runs the backward kernel on `p`; gq, gk and gv are written. */
function backwardKernel(
  dev: DeviceBackend,
  p: Problem,
  [q, k, v, mask, out, lse, gout, gq, gk, gv]: Ptr[],
  layout: BigInt64Array,
): void {
  dev.check(dev.kernels.attentionBackward(
    q,
    k,
    v,
    mask,
    out,
    lse,
    gout,
    gq,
    gk,
    gv,
    layout,
    p.bh,
    p.heads,
    p.tq,
    p.tk,
    p.d,
    p.dv,
    p.scale,
    p.causal ? 1 : 0,
    p.dropoutP,
    p.seed,
    p.offset,
  ));
}

/**
 * Attention over q `[..., Tq, D]`, k `[..., Tk, D]`, v `[..., Tk, Dv]` with equal leading
 * dimensions, like `torch.nn.functional.scaled_dot_product_attention`: softmax(q kᵀ · scale +
 * mask) v, with a causal mask, an additive mask and dropout on the weights as options.
 *
 * @example Causal self-attention over 2 heads
 * ```ts
 * import assert from "node:assert/strict";
 * import { F, randn } from "../../../mod.ts";
 * const [q, k, v] = [randn([1, 2, 5, 4]), randn([1, 2, 5, 4]), randn([1, 2, 5, 4])];
 * const y = F.scaledDotProductAttention(q, k, v, { isCausal: true });
 * assert.deepStrictEqual(y.shape, [1, 2, 5, 4]);
 * // the first query sees only the first key: its output is v's first row
 * const first = Array.from(y.select(2, 0).toArray()), v0 = Array.from(v.select(2, 0).toArray());
 * first.forEach((x, i) => assert.ok(Math.abs(x - v0[i]) < 1e-6));
 * ```
 */
export function scaledDotProductAttention(
  q: Tensor,
  k: Tensor,
  v: Tensor,
  options: AttentionOptions = {},
): Tensor {
  const op = "scaledDotProductAttention";
  const half = viaF32(
    op,
    [q, k, v, options.attnMask],
    (q, k, v, attnMask) => scaledDotProductAttention(q, k, v, { ...options, attnMask }),
    ([q, k, v]) => resultType(q, k, v),
  );
  if (half) return half;
  expectF32(op, q, k, v);
  expectSameDevice(op, q, k, v);
  if (q.ndim < 2 || k.ndim !== q.ndim || v.ndim !== q.ndim) {
    throw new RangeError(
      `${op}: q, k and v need the same rank (at least 2), got ${formatShape(q.shape)}, ${
        formatShape(k.shape)
      } and ${formatShape(v.shape)}`,
    );
  }
  const lead = q.shape.slice(0, -2);
  const [tq, d] = q.shape.slice(-2), [tk, dk] = k.shape.slice(-2), [tv, dv] = v.shape.slice(-2);
  if (!sameShape(k.shape.slice(0, -2), lead) || !sameShape(v.shape.slice(0, -2), lead)) {
    throw new RangeError(
      `${op}: leading dimensions differ: q ${formatShape(q.shape)}, k ${formatShape(k.shape)}, v ${
        formatShape(v.shape)
      }`,
    );
  }
  if (dk !== d || tv !== tk) {
    throw new RangeError(
      `${op}: k ${formatShape(k.shape)} must be [..., Tk, ${d}] and v ${
        formatShape(v.shape)
      } [..., ${tk}, Dv]`,
    );
  }
  if (d === 0 || dv === 0) {
    throw new RangeError(`${op}: head sizes must be positive, got ${d} and ${dv}`);
  }
  const dropoutP = options.dropoutP ?? 0;
  if (!(dropoutP >= 0 && dropoutP < 1)) {
    throw new RangeError(`${op}: dropoutP must be in [0, 1), got ${dropoutP}`);
  }
  const causal = options.isCausal ?? false;
  const attnMask = options.attnMask ?? null;
  if (causal && attnMask) {
    throw new RangeError(`${op}: give either attnMask or isCausal, not both (as PyTorch)`);
  }
  const scale = options.scale ?? 1 / Math.sqrt(d);
  if (!Number.isFinite(scale)) throw new RangeError(`${op}: scale must be finite, got ${scale}`);

  const bh = shapeSize(lead);
  const [Q, K, V] = [q, k, v].map((x) => headStrides(x, lead) ? x : contiguous(x));
  let maskInfo = null;
  if (attnMask) {
    expectF32(`${op} attnMask`, attnMask);
    expectSameDevice(op, q, attnMask);
    maskInfo = maskLayout(attnMask, lead, tq, tk);
  }
  const heads = lead.length ? lead[lead.length - 1] : 1;
  const out = emptyOn(Q, [...lead, tq, dv]);
  const lse = emptyOn(Q, [bh, tq]);
  const seed = dropoutP > 0 ? randomSeed() : 0n;
  const offset = dropoutP > 0 ? nextRandomOffset(bh * tq * tk) : 0n;
  const dev = out.storage.backend;
  const maskPtr = maskInfo ? maskInfo.mask.ptr : null;
  const layout = (gout?: Tensor, grads?: Tensor[]) =>
    packLayout(
      [Q, K, V, out, gout, ...(grads ?? [])].map((x) => (x ? headStrides(x, lead)! : null)),
      maskInfo,
    );
  const problem: Problem = { bh, heads, tq, tk, d, dv, scale, causal, dropoutP, seed, offset };
  forwardKernel(dev, problem, [Q.ptr, K.ptr, V.ptr, maskPtr, out.ptr, lse.ptr], layout());
  const maskCopy = maskInfo && maskInfo.mask !== attnMask ? [maskInfo.mask] : [];
  return record(
    out,
    "ScaledDotProductAttentionBackward",
    [Q, K, V],
    (gy) => {
      const G = headStrides(gy, lead) ? gy : contiguous(gy);
      const grads = [emptyOn(Q, Q.shape), emptyOn(Q, K.shape), emptyOn(Q, V.shape)];
      const ptrs = [
        Q.ptr,
        K.ptr,
        V.ptr,
        maskPtr,
        out.ptr,
        lse.ptr,
        G.ptr,
        ...grads.map((g) => g.ptr),
      ];
      backwardKernel(dev, problem, ptrs, layout(G, grads));
      if (G !== gy) G.dispose();
      return grads.map((g, i) => {
        if ([Q, K, V][i].requiresGrad) return g;
        g.dispose();
        return null;
      });
    },
    [lse, ...maskCopy, ...temporaries([Q, q], [K, k], [V, v])],
    [Q, K, V, out, ...(maskInfo ? [maskInfo.mask] : [])],
  );
}

/**
 * Causal self-attention straight from a fused projection `qkv` [B, T, 3C] (q, k and v side by
 * side, each split into `nHead` heads of C / nHead, as nanoGPT's `c_attn` makes them) to
 * y [B, T, C] with the heads side by side again: the same numbers as splitting, transposing and
 * calling {@linkcode scaledDotProductAttention}, without the copies, since the kernel reads and
 * writes the heads in place and the backward writes one [B, T, 3C] gradient.
 */
export function packedCausalAttention(qkv: Tensor, nHead: number, dropoutP = 0): Tensor {
  const op = "packedCausalAttention";
  const half = viaF32(op, [qkv], (x) => packedCausalAttention(x, nHead, dropoutP));
  if (half) return half;
  expectF32(op, qkv);
  // A fractional head count passes the divisibility test (36 % 4.5) and the kernel reads past the
  // tensor: refused here.
  if (!Number.isInteger(nHead) || nHead < 1 || qkv.ndim !== 3 || qkv.shape[2] % (3 * nHead) !== 0) {
    throw new RangeError(
      `${op}: expected [B, T, 3C] with C divisible by ${nHead} heads (a positive integer), got ${
        formatShape(qkv.shape)
      }`,
    );
  }
  if (!(dropoutP >= 0 && dropoutP < 1)) {
    throw new RangeError(`${op}: dropoutP must be in [0, 1), got ${dropoutP}`);
  }
  const [b, t, c3] = qkv.shape;
  const c = c3 / 3, hs = c / nHead, bh = b * nHead;
  const X = contiguous(qkv);
  const y = emptyOn(X, [b, t, c]);
  const lse = emptyOn(X, [bh, t]);
  const seed = dropoutP > 0 ? randomSeed() : 0n;
  const offset = dropoutP > 0 ? nextRandomOffset(bh * t * t) : 0n;
  const packed: HeadStrides = [t * c3, hs, c3], merged: HeadStrides = [t * c, hs, c];
  const layout = packLayout([packed, packed, packed, merged, merged, packed, packed, packed], null);
  const part = (base: Tensor, i: number) => Deno.UnsafePointer.offset(base.ptr!, i * c * 4);
  const dev = y.storage.backend;
  const problem: Problem = {
    bh,
    heads: nHead,
    tq: t,
    tk: t,
    d: hs,
    dv: hs,
    scale: 1 / Math.sqrt(hs),
    causal: true,
    dropoutP,
    seed,
    offset,
  };
  const qkvPtrs = (base: Tensor) => [0, 1, 2].map((i) => part(base, i));
  forwardKernel(dev, problem, [...qkvPtrs(X), null, y.ptr, lse.ptr], layout);
  return record(
    y,
    "PackedCausalAttentionBackward",
    [X],
    (gy) => {
      const G = contiguous(gy);
      const g = emptyOn(X, X.shape);
      backwardKernel(
        dev,
        problem,
        [...qkvPtrs(X), null, y.ptr, lse.ptr, G.ptr, ...qkvPtrs(g)],
        layout,
      );
      if (G !== gy) G.dispose();
      return [g];
    },
    [lse, ...temporaries([X, qkv])],
    [X, y],
  );
}
