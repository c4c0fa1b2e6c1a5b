/** Argument checks shared by the functional forms in src/nn. @module */

import { formatShape, type Tensor } from "../tensor/tensor.ts";

/**
 * Throws unless every tensor is floating-point (f32, bf16, f16: the compositions below compute
 * on any of them, see [Note: half compute]), naming the op and what it got.
 */
export function expectFloat(op: string, ...tensors: Tensor[]): void {
  for (const t of tensors) {
    if (t.dtype !== "f32" && t.dtype !== "bf16" && t.dtype !== "f16") {
      throw new TypeError(
        `${op}: expected a floating-point tensor, got ${t.dtype} ${formatShape(t.shape)}`,
      );
    }
  }
}

/** Whether two shapes are equal. */
export function sameShape(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((d, i) => d === b[i]);
}
