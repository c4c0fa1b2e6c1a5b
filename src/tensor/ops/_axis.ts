/** Moving one dimension to the end and back, so that row kernels serve every dimension. @module */

import { normalizeDim } from "../layout.ts";
import type { Tensor } from "../tensor.ts";
import { transpose } from "./shape.ts";

/** `t` viewed with dimension `d` moved last, the others in order (views in the graph, no copy). */
export function moveDimLast(t: Tensor, d: number): Tensor {
  let out = t;
  for (let i = d; i < t.ndim - 1; i++) out = transpose(out, i, i + 1);
  return out;
}

/** The inverse of {@linkcode moveDimLast}: the last dimension moved back to `d`. */
export function moveLastDim(t: Tensor, d: number): Tensor {
  let out = t;
  for (let i = t.ndim - 1; i > d; i--) out = transpose(out, i - 1, i);
  return out;
}

/** Normalises a list of dimensions (one number, an array, or all when absent); rejects repeats. */
export function normalizeDims(
  dim: number | readonly number[] | null | undefined,
  ndim: number,
  op: string,
): number[] {
  if (dim === undefined || dim === null) return Array.from({ length: ndim }, (_, i) => i);
  const dims = (typeof dim === "number" ? [dim] : dim).map((d) => normalizeDim(d, ndim, op));
  if (dims.length === 0) return Array.from({ length: ndim }, (_, i) => i);
  for (let i = 0; i < dims.length; i++) {
    if (dims.indexOf(dims[i]) !== i) {
      throw new RangeError(`${op}: dimension ${dims[i]} appears more than once in [${dim}]`);
    }
  }
  return dims;
}
