/** Helpers shared by the op families: input checks and outputs on the inputs' device. @module */

import { formatShape } from "../layout.ts";
import { type DType, refuseStorageOnly } from "../dtype.ts";
import type { Tensor } from "../tensor.ts";

/** Throws unless every tensor is f32 (the dtype the float kernels take). */
export function expectF32(op: string, ...tensors: Tensor[]): void {
  for (const t of tensors) {
    refuseStorageOnly(op, t.dtype);
    if (t.dtype !== "f32") {
      throw new TypeError(`${op}: expected an f32 tensor, got ${t.dtype} ${formatShape(t.shape)}`);
    }
  }
}

/** Throws unless the tensors are on the same device. */
export function expectSameDevice(op: string, ...tensors: Tensor[]): void {
  const device = tensors[0].device;
  for (const t of tensors) {
    if (t.device !== device) {
      throw new Error(`${op}: tensors on different devices (${device} and ${t.device})`);
    }
  }
}

/** A new contiguous tensor on `like`'s device (uninitialised unless `zero`). */
export function emptyOn(
  like: Tensor,
  shape: readonly number[],
  dtype: DType = "f32",
  zero = false,
): Tensor {
  return like.newEmpty(shape, { dtype, zero });
}

/**
 * The contiguous (or expanded) copies an op made of its arguments, as `[copy, original]` pairs:
 * the op's node owns them (they are freed with the graph, or at once when nothing is recorded).
 */
export function temporaries(...pairs: [Tensor, Tensor][]): Tensor[] {
  const out: Tensor[] = [];
  for (const [copy, original] of pairs) {
    if (copy !== original && !out.includes(copy)) out.push(copy);
  }
  return out;
}
