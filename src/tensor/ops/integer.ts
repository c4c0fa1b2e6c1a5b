/**
 * Arithmetic that involves i32 or bool tensors, with PyTorch's type promotion: i32 with i32 (or
 * an integer number) stays i32 and is computed here, anything with f32 (or a fraction) becomes
 * f32 (elementwise.ts converts the operands), and `/` is true division (f32) while `floorDivide`
 * keeps integers. f32 with f32 never comes here.
 * @module
 */

import { BinaryOp } from "../device/device.ts";
import { refuseStorageOnly } from "../dtype.ts";
import { formatShape } from "../layout.ts";
import type { Tensor } from "../tensor.ts";
import { emptyOn } from "./_util.ts";
import { operands } from "./compare.ts";
import { to } from "./shape.ts";

/** The arithmetic ops of this file. */
export type ArithName = keyof typeof BinaryOp | "floorDivide";

/** Whether `a op b` involves an integer or bool tensor (the f32 kernels take the rest). */
export function isIntegerOperation(a: Tensor, b: Tensor | number): boolean {
  return a.dtype !== "f32" || (typeof b !== "number" && b.dtype !== "f32");
}

/**
 * Whether `a op b`, one operand at least i32 or bool, computes in i32 here (else in f32: mixed
 * operands, or true division).
 *
 * @throws TypeError for two bool tensors, and for `floorDivide` of anything but integers.
 */
export function staysInteger(op: ArithName, a: Tensor, b: Tensor | number): boolean {
  refuseStorageOnly(op, a.dtype, typeof b === "number" ? "i32" : b.dtype);
  if (a.dtype === "bool" && typeof b !== "number" && b.dtype === "bool") {
    throw new TypeError(
      `${op}: arithmetic on two bool tensors is not supported; convert one with .to("i32")`,
    );
  }
  const integer = (a.dtype !== "f32") &&
    (typeof b === "number" ? Number.isInteger(b) : b.dtype !== "f32");
  if (!integer && op === "floorDivide") {
    throw new TypeError(
      `floorDivide: expected i32 operands, got ${a.dtype} ${formatShape(a.shape)} and ${
        typeof b === "number" ? `the number ${b}` : `${b.dtype} ${formatShape(b.shape)}`
      }`,
    );
  }
  return integer && op !== "div";
}

/** Floor division of i32 operands (PyTorch's `floor_divide`). */
export function floorDivide(a: Tensor, b: Tensor | number): Tensor {
  staysInteger("floorDivide", a, b);
  return integerArith("floorDivide", a, b);
}

/** `a op b` in i32, for operands that {@linkcode staysInteger} accepted. */
export function integerArith(op: ArithName, a: Tensor, b: Tensor | number): Tensor {
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
