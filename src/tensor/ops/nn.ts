/**
 * Neural-network ops with fused native kernels: softmax, log-softmax, MSE, layer norm, embedding
 * and dropout (cross-entropy, csrc/core/cross_entropy.c's family, is cross_entropy.ts).
 * @module
 */

import { UnaryOp } from "../device/device.ts";
import { record } from "../autograd.ts";
import { formatShape, normalizeDim, sameShape, shapeSize } from "../layout.ts";
import type { Tensor } from "../tensor.ts";
import { emptyOn, expectF32, expectSameDevice, temporaries } from "./_util.ts";
import { moveDimLast, moveLastDim } from "./_axis.ts";
import { viaF32 } from "./_half.ts";
import { isHalf } from "../dtype.ts";
import { matchHalfLogSoftmax } from "./log_softmax_half.ts";
import { contiguous, identity } from "./shape.ts";
import { nextRandomOffset, randomSeed } from "../random.ts";

function softmaxImpl(t: Tensor, dim: number, log: boolean): Tensor {
  const op = log ? "logSoftmax" : "softmax";
  const inRows = normalizeDim(dim, t.ndim, op) === Math.max(t.ndim - 1, 0);
  const half = viaF32(
    op,
    [t],
    (x) => {
      const y = softmaxImpl(x, dim, log);
      if (log && inRows && isHalf(t.dtype)) matchHalfLogSoftmax(y, x, t.dtype);
      return y;
    },
    undefined,
    inRows,
  );
  if (half) return half;
  expectF32(op, t);
  const d = normalizeDim(dim, t.ndim, op);
  const last = Math.max(t.ndim - 1, 0);
  // Another dimension is moved last (a strided copy), handled as rows, and moved back.
  const moved = d === last ? t : moveDimLast(t, d);
  const x = contiguous(moved);
  const cols = t.ndim === 0 ? 1 : t.shape[d];
  const rows = cols === 0 ? 0 : x.numel() / cols;
  const y = emptyOn(x, x.shape);
  if (cols === 0) return d === last ? y : contiguous(moveLastDim(y, d));
  const dev = y.storage.backend;
  dev.check(dev.kernels.softmax(x.ptr, y.ptr, rows, cols, log ? 1 : 0));
  const out = record(
    y,
    log ? "LogSoftmaxBackward" : "SoftmaxBackward",
    [x],
    (gy) => {
      const gx = emptyOn(x, x.shape);
      dev.check(dev.kernels.softmaxBackward(y.ptr, gy.ptr, gx.ptr, rows, cols, log ? 1 : 0));
      return [gx];
    },
    temporaries([x, moved]),
    [y],
  );
  return d === last ? out : contiguous(moveLastDim(out, d));
}

/**
 * Softmax over dimension `dim` (the last by default).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { tensor } from "../../../mod.ts";
 * const p = tensor([[0, 0], [Math.log(3), 0]]).softmax(0);
 * assert.deepEqual(Array.from(p.toArray(), (v) => v.toFixed(2)), ["0.25", "0.50", "0.75", "0.50"]);
 * ```
 */
export function softmax(t: Tensor, dim = -1): Tensor {
  return softmaxImpl(t, dim, false);
}

/**
 * Log-softmax over dimension `dim` (the last by default), numerically stable.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { tensor } from "../../../mod.ts";
 * const y = tensor([[0, 0, 0]]).logSoftmax(1);
 * assert.ok(Math.abs(y.toArray()[0] + Math.log(3)) < 1e-6);
 * ```
 */
export function logSoftmax(t: Tensor, dim = -1): Tensor {
  return softmaxImpl(t, dim, true);
}

/** Mean squared error between `input` and `target` of the same shape. */
export function mseLoss(input: Tensor, target: Tensor): Tensor {
  const half = viaF32("mseLoss", [input, target], mseLoss);
  if (half) return half;
  expectF32("mseLoss", input, target);
  if (!sameShape(input.shape, target.shape)) {
    throw new RangeError(
      `mseLoss: input ${formatShape(input.shape)} and target ${formatShape(target.shape)} differ`,
    );
  }
  expectSameDevice("mseLoss", input, target);
  const a = contiguous(input), b = contiguous(target);
  const loss = emptyOn(a, []);
  const dev = loss.storage.backend;
  const needsGrad = a.requiresGrad || b.requiresGrad;
  const ga = needsGrad ? emptyOn(a, a.shape) : null;
  dev.check(dev.kernels.mse(a.ptr, b.ptr, a.numel(), loss.ptr, ga?.ptr ?? null));
  return record(
    loss,
    "MseLossBackward",
    [a, b],
    (gy) => {
      const scale = gy.item();
      const gA = a.requiresGrad ? emptyOn(a, a.shape) : null;
      const gB = b.requiresGrad ? emptyOn(b, b.shape) : null;
      if (gA) dev.check(dev.kernels.unary(UnaryOp.scale, ga!.ptr, gA.ptr, gA.numel(), scale));
      if (gB) dev.check(dev.kernels.unary(UnaryOp.scale, ga!.ptr, gB.ptr, gB.numel(), -scale));
      return [gA, gB];
    },
    [...(ga ? [ga] : []), ...temporaries([a, input], [b, target])],
    [],
  );
}

/** Layer normalization over the trailing `normalizedShape` dimensions (PyTorch's `F.layer_norm`). */
export function layerNorm(
  x: Tensor,
  normalizedShape: readonly number[],
  weight?: Tensor | null,
  bias?: Tensor | null,
  eps = 1e-5,
): Tensor {
  // A half input with f32 weights gives the input's dtype, as PyTorch's mixed-type layer norm.
  const half = viaF32(
    "layerNorm",
    [x, weight, bias],
    (x, w, b) => layerNorm(x, normalizedShape, w, b, eps),
    ([x]) => x.dtype,
  );
  if (half) return half;
  expectF32("layerNorm", x, ...[weight, bias].filter((t): t is Tensor => !!t));
  const tail = x.shape.slice(x.ndim - normalizedShape.length);
  if (normalizedShape.length === 0 || !sameShape(tail, normalizedShape)) {
    throw new RangeError(
      `layerNorm: normalizedShape ${formatShape(normalizedShape)} does not end input ${
        formatShape(x.shape)
      }`,
    );
  }
  for (const [name, p] of [["weight", weight], ["bias", bias]] as const) {
    if (p && !sameShape(p.shape, normalizedShape)) {
      throw new RangeError(
        `layerNorm: ${name} ${formatShape(p.shape)} does not match ${formatShape(normalizedShape)}`,
      );
    }
  }
  const cols = shapeSize(normalizedShape);
  const rows = cols === 0 ? 0 : x.numel() / cols;
  const X = contiguous(x);
  const w = weight ? contiguous(weight) : null, b = bias ? contiguous(bias) : null;
  const y = emptyOn(X, x.shape), meanT = emptyOn(X, [rows]), rstd = emptyOn(X, [rows]);
  const dev = y.storage.backend;
  dev.check(
    dev.kernels.layernorm(
      X.ptr,
      w?.ptr ?? null,
      b?.ptr ?? null,
      y.ptr,
      meanT.ptr,
      rstd.ptr,
      rows,
      cols,
      eps,
    ),
  );
  const inputs = [X, ...(w ? [w] : []), ...(b ? [b] : [])];
  return record(
    y,
    "NativeLayerNormBackward",
    inputs,
    (gy) => {
      const gx = X.requiresGrad ? emptyOn(X, X.shape) : null;
      const gw = w?.requiresGrad ? emptyOn(X, w.shape, "f32", true) : null;
      const gb = b?.requiresGrad ? emptyOn(X, b.shape, "f32", true) : null;
      dev.check(
        dev.kernels.layernormBackward(
          gy.ptr,
          X.ptr,
          w?.ptr ?? null,
          meanT.ptr,
          rstd.ptr,
          gx?.ptr ?? null,
          gw?.ptr ?? null,
          gb?.ptr ?? null,
          rows,
          cols,
        ),
      );
      return [gx, ...(w ? [gw] : []), ...(b ? [gb] : [])];
    },
    [meanT, rstd, ...temporaries([X, x], ...(w ? [[w, weight!] as [Tensor, Tensor]] : []))],
    w ? [X, w] : [X],
  );
}

/** Rows of `weight` [num, dim] picked by integer `indices` (any shape, i32): output [...indices, dim]. */
export function embedding(indices: Tensor, weight: Tensor): Tensor {
  const half = viaF32("embedding", [indices, weight], embedding, ([, w]) => w.dtype);
  if (half) return half;
  expectF32("embedding", weight);
  if (indices.dtype !== "i32") {
    throw new TypeError(`embedding: indices must be i32, got ${indices.dtype}`);
  }
  if (weight.ndim !== 2) {
    throw new RangeError(`embedding: weight must be 2-d, got ${formatShape(weight.shape)}`);
  }
  expectSameDevice("embedding", indices, weight);
  const [num, dim] = weight.shape;
  const idx = contiguous(indices), w = contiguous(weight);
  const out = emptyOn(w, [...indices.shape, dim]);
  const dev = out.storage.backend;
  dev.check(dev.kernels.embedding(w.ptr, idx.ptr, out.ptr, idx.numel(), num, dim));
  return record(
    out,
    "EmbeddingBackward",
    [w],
    (gy) => {
      const gw = emptyOn(w, w.shape, "f32", true);
      dev.check(dev.kernels.embeddingBackward(gy.ptr, idx.ptr, gw.ptr, idx.numel(), num, dim));
      return [gw];
    },
    temporaries([w, weight]),
    [idx],
  );
}

/**
 * Zeroes each element with probability `p` and scales the rest by 1/(1-p) when `training`; the
 * identity otherwise. The mask comes from the seeded counter RNG and is recomputed in backward.
 */
export function dropout(x: Tensor, p = 0.5, training = true): Tensor {
  const half = viaF32("dropout", [x], (x) => dropout(x, p, training));
  if (half) return half;
  expectF32("dropout", x);
  if (!(p >= 0 && p <= 1)) throw new RangeError(`dropout: probability ${p} is outside [0, 1]`);
  if (!training || p === 0) return identity(x);
  const X = contiguous(x);
  const out = emptyOn(X, X.shape, "f32", p === 1);
  if (p === 1) {
    return record(
      out,
      "DropoutBackward",
      [X],
      () => [emptyOn(X, X.shape, "f32", true)],
      temporaries([X, x]),
      [],
    );
  }
  const n = X.numel(), seed = randomSeed(), offset = nextRandomOffset(n);
  const dev = out.storage.backend;
  dev.check(dev.kernels.dropout(X.ptr, out.ptr, n, p, seed, offset));
  return record(
    out,
    "DropoutBackward",
    [X],
    (gy) => {
      const gx = emptyOn(X, X.shape);
      dev.check(dev.kernels.dropout(gy.ptr, gx.ptr, n, p, seed, offset));
      return [gx];
    },
    temporaries([X, x]),
    [],
  );
}
