/** Argument checks shared by the functional forms in src/nn. @module */

import { formatShape, type Tensor } from "../tensor/tensor.ts";

/** Throws unless every tensor is f32, naming the op and what it got. */
export function expectF32(op: string, ...tensors: Tensor[]): void {
  for (const t of tensors) {
    if (t.dtype !== "f32") {
      throw new TypeError(`${op}: expected an f32 tensor, got ${t.dtype} ${formatShape(t.shape)}`);
    }
  }
}

/** Whether two shapes are equal. */
export function sameShape(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((d, i) => d === b[i]);
}
