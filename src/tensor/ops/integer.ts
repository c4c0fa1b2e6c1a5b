/**
 * Arithmetic that involves i32 or bool tensors, with PyTorch's type promotion: i32 with i32 (or
 * an integer number) stays i32, anything with f32 (or a fraction) becomes f32, and `/` is true
 * division (f32) while `floorDivide` keeps integers. f32 with f32 never comes here.
 * @module
 */

import { BinaryOp } from "../device/device.ts";
import { formatShape } from "../layout.ts";
import type { Tensor } from "../tensor.ts";
import { emptyOn } from "./_util.ts";
import { operands } from "./compare.ts";
import { add, div, mul, sub } from "./elementwise.ts";
import { to } from "./shape.ts";

/** The arithmetic ops of this file. */
export type ArithName = keyof typeof BinaryOp | "floorDivide";

/** Whether `a op b` involves an integer or bool tensor (the f32 kernels take the rest). */
export function isIntegerOperation(a: Tensor, b: Tensor | number): boolean {
  return a.dtype !== "f32" || (typeof b !== "number" && b.dtype !== "f32");
}

/** `a op b` for operands of which one at least is i32 or bool (see the module doc). */
export function integerArith(op: ArithName, a: Tensor, b: Tensor | number): Tensor {
  if (a.dtype === "bool" && typeof b !== "number" && b.dtype === "bool") {
    throw new TypeError(
      `${op}: arithmetic on two bool tensors is not supported; convert one with .to("i32")`,
    );
  }
  const integer = (a.dtype !== "f32") &&
    (typeof b === "number" ? Number.isInteger(b) : b.dtype !== "f32");
  if (!integer || op === "div") {
    if (op === "floorDivide") {
      throw new TypeError(
        `floorDivide: expected i32 operands, got ${a.dtype} ${formatShape(a.shape)} and ${
          typeof b === "number" ? `the number ${b}` : `${b.dtype} ${formatShape(b.shape)}`
        }`,
      );
    }
    // Mixed or true division: in f32, where gradients flow to the f32 operand.
    const x = to(a, "f32"), y = typeof b === "number" ? b : to(b, "f32");
    const out = { add, sub, mul, div }[op](x, y);
    // A converted operand that a recorded backward reads stays alive (freed by tidy or the GC).
    if (out.gradFn === null) {
      if (x !== a) x.dispose();
      if (typeof y !== "number" && y !== b) y.dispose();
    }
    return out;
  }
  const { x, y, shape, release } = operands(op, a, b);
  try {
    // Both are i32 now (bool operands promote to i32 next to an integer).
    const xi = to(x, "i32"), yi = to(y, "i32");
    const out = emptyOn(xi, shape, "i32");
    const dev = out.storage.backend;
    try {
      dev.check(
        dev.kernels.binaryI32(
          op === "floorDivide" ? BinaryOp.div : BinaryOp[op],
          xi.ptr,
          xi.numel(),
          yi.ptr,
          yi.numel(),
          out.ptr,
          out.numel(),
        ),
      );
    } finally {
      if (xi !== x) xi.dispose();
      if (yi !== y) yi.dispose();
    }
    return out;
  } finally {
    release();
  }
}
