/**
 * In-place arithmetic with tensors or numbers: `add_`, `sub_`, `mul_`, `div_`, `clamp_`, and a
 * `copy_` that broadcasts and converts like PyTorch's. A tensor operand broadcasts to `self`'s
 * shape; `self` keeps its dtype (an f32 result cannot go into an i32 tensor). Each write goes
 * through `checkInPlace`, which bumps the storage version: a backward that reads the tensor then
 * refuses to run (see [Note: saved-tensor versions] in autograd.ts).
 * @module
 */

import { BinaryOp, UnaryOp } from "../device/device.ts";
import { addScaled, checkInPlace, copyInto, updateHalf } from "../inplace.ts";
import { broadcastShapes, formatShape, sameShape } from "../layout.ts";
import type { Tensor } from "../tensor.ts";
import { noGrad } from "../autograd.ts";
import { type ComputeDType, isFloat, isHalf, refuseStorageOnly } from "../dtype.ts";
import { scalarOn } from "./compare.ts";
import { contiguous, expand, to } from "./shape.ts";

type Op = keyof typeof BinaryOp;

/** Whether `from` broadcasts to exactly `to`. */
function broadcastsTo(from: readonly number[], to: readonly number[]): boolean {
  const lead = to.length - from.length;
  return lead >= 0 && from.every((d, i) => d === 1 || d === to[lead + i]);
}

/** `other` as a new detached contiguous tensor of `self`'s shape and `dtype`. */
function fitted(op: string, self: Tensor, other: Tensor, dtype = self.dtype): Tensor {
  if (other.device !== self.device) {
    throw new Error(`${op}: tensors on different devices (${self.device} and ${other.device})`);
  }
  const shape = broadcastShapes(op, self.shape, other.shape);
  if (!sameShape(shape, self.shape)) {
    throw new RangeError(
      `${op}: the operand ${formatShape(other.shape)} does not broadcast to self's shape ${
        formatShape(self.shape)
      }`,
    );
  }
  return noGrad(() => {
    const steps = [other.detach()];
    steps.push(to(steps[0], dtype));
    steps.push(expand(steps[1], self.shape));
    const out = contiguous(steps[2]);
    // contiguous() of an already contiguous view is the view itself: copy it, so that the caller
    // owns fresh memory and writing self never aliases its own operand.
    const owned = steps.includes(out) ? out.clone() : out;
    for (const t of new Set(steps)) t.dispose();
    return owned;
  });
}

/**
 * The unary kernel and parameter of `x op other` for an f32 tensor and a number. Every op is
 * named: a new binary op fails to compile here until it has its form.
 */
function scalarForm(op: Op, other: number, alpha: number): [number, number] {
  switch (op) {
    case "add":
      return [UnaryOp.addScalar, other * alpha];
    case "sub":
      return [UnaryOp.addScalar, -other * alpha];
    case "mul":
      return [UnaryOp.scale, other];
    case "div":
      return [UnaryOp.scale, 1 / other];
    default: {
      const unknown: never = op;
      throw new Error(`no scalar form for binary op ${unknown}`);
    }
  }
}

/** self = self op other (other a tensor or number, times `alpha` for add and sub). */
export function arith(op: Op, self: Tensor, other: Tensor | number, alpha = 1): void {
  const name = `${op}_`;
  refuseStorageOnly(name, self.dtype, typeof other === "number" ? "i32" : other.dtype);
  if (self.dtype === "bool") {
    throw new TypeError(`${name}: bool tensors have no in-place arithmetic`);
  }
  if (isHalf(self.dtype)) {
    // In f32 on the values, rounded back once (PyTorch's in-place ops on bf16 and f16).
    checkInPlace(self, name);
    return updateHalf(self, (wide) => arith(op, wide, other, alpha));
  }
  const otherType = typeof other === "number"
    ? (Number.isInteger(other * alpha) ? "i32" : "f32")
    : other.dtype;
  if (self.dtype === "i32" && (op === "div" || isFloat(otherType) || !Number.isInteger(alpha))) {
    throw new TypeError(
      `${name}: the result is ${
        isHalf(otherType) ? otherType : "f32"
      } and cannot be written into an i32 tensor (${
        typeof other === "number" ? `operand ${other * alpha}` : `operand ${other.dtype}`
      }${op === "div" ? ", true division" : ""}); convert self with .to("f32")`,
    );
  }
  if (
    typeof other !== "number" && op === "add" && self.dtype === "f32" && other.dtype === "f32" &&
    sameShape(other.shape, self.shape)
  ) {
    addScaled(self, other, alpha); // the optimizers' fast path, unchanged
    return;
  }
  if (typeof other !== "number" && op === "sub" && alpha !== 1) {
    return arith("add", self, other, -alpha);
  }
  const dev = self.storage.backend;
  const n = self.numel();
  if (self.dtype === "f32" && typeof other === "number") {
    checkInPlace(self, name);
    const [code, p] = scalarForm(op, other, alpha);
    dev.check(dev.kernels.unary(code, self.ptr, self.ptr, n, p));
    return;
  }
  const value = typeof other === "number"
    ? scalarOn(self, other * alpha, self.dtype as ComputeDType)
    : fitted(name, self, alpha === 1 ? other : noGrad(() => other.mul(alpha)), self.dtype);
  checkInPlace(self, name);
  try {
    const m = value.numel();
    dev.check(
      self.dtype === "f32"
        ? dev.kernels.binary(BinaryOp[op], self.ptr, n, value.ptr, m, self.ptr, n)
        : dev.kernels.binaryI32(BinaryOp[op], self.ptr, n, value.ptr, m, self.ptr, n),
    );
  } finally {
    value.dispose();
  }
}

/** self = min(max(self, min), max) on f32; either bound may be left out, not both. */
export function clamp(self: Tensor, min?: number, max?: number): void {
  if (min === undefined && max === undefined) {
    throw new RangeError("clamp_: at least one of 'min' or 'max' must be given");
  }
  for (const [what, v] of [["min", min], ["max", max]] as const) {
    if (v !== undefined && typeof v !== "number") {
      throw new TypeError(`clamp_: ${what} must be a number, got ${typeof v}`);
    }
  }
  if (isHalf(self.dtype)) {
    checkInPlace(self, "clamp_");
    return updateHalf(self, (wide) => clamp(wide, min, max));
  }
  if (self.dtype !== "f32") {
    throw new TypeError(`clamp_: expected an f32 tensor, got ${self.dtype}`);
  }
  checkInPlace(self, "clamp_");
  const dev = self.storage.backend;
  dev.check(
    dev.kernels.clampRange(self.ptr, self.ptr, self.numel(), min ?? -Infinity, max ?? Infinity),
  );
}

/** self = src, broadcast to self's shape and converted to self's dtype (from any device). */
export function copy(self: Tensor, src: Tensor): void {
  if (src.dtype === self.dtype && sameShape(src.shape, self.shape)) {
    checkInPlace(self, "copy_");
    copyInto(self, src);
    return;
  }
  if (!broadcastsTo(src.shape, self.shape)) {
    throw new RangeError(
      `copy_: source ${src.dtype} ${formatShape(src.shape)} does not match ${self.dtype} ${
        formatShape(self.shape)
      }`,
    );
  }
  const moved = src.device === self.device ? src : noGrad(() => src.detach().to(self.device));
  const value = fitted("copy_", self, moved);
  checkInPlace(self, "copy_");
  copyInto(self, value);
  value.dispose();
  if (moved !== src) moved.dispose();
}
