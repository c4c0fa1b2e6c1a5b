/**
 * Reading a tensor's elements into host (JavaScript) memory, from any device: through the
 * device's `copyOut`, so that a GPU tensor reads the same way as a cpu one. bf16 and f16 read as
 * their f32 values (PyTorch's `tolist()` gives floats too), widened on the tensor's device by the
 * conversion kernel; their raw bits are `t.view("u16").toArray()`.
 * @module
 */

import { DTypeCode } from "./device/device.ts";
import { formatShape, shapeSize } from "./layout.ts";
import { bf16Value, isHalf, itemSize } from "./dtype.ts";
import type { Tensor } from "./tensor.ts";

/** Host memory that `item()` reads one element through (no allocation per call). */
const scalar = new DataView(new ArrayBuffer(4));
const scalarPtr = Deno.UnsafePointer.of(scalar.buffer);

/** `t`'s values as a new contiguous f32 tensor on its device (`t` bf16 or f16, contiguous). */
function widened(t: Tensor): Tensor {
  const out = t.newEmpty(t.shape, { dtype: "f32" });
  const dev = out.storage.backend;
  try {
    dev.check(dev.kernels.castHalfF32(t.ptr, DTypeCode[t.dtype as "bf16"], out.ptr, t.numel()));
  } catch (error) {
    out.dispose();
    throw error;
  }
  return out;
}

/** `t.toArray()`: a copy of the elements, row-major (bf16 and f16 as f32 values). */
export function toArray(t: Tensor): Float32Array | Int32Array | Uint8Array | Uint16Array {
  const packed = t.isContiguous() ? t : t.contiguous();
  const n = packed.numel();
  let src = packed;
  if (isHalf(t.dtype) && n > 0) {
    src = widened(packed);
    if (packed !== t) packed.dispose();
  }
  const out = t.dtype === "f32" || isHalf(t.dtype)
    ? new Float32Array(n)
    : t.dtype === "i32"
    ? new Int32Array(n)
    : t.dtype === "u16"
    ? new Uint16Array(n)
    : new Uint8Array(n);
  if (n > 0) {
    src.storage.backend.copyOut(Deno.UnsafePointer.of(out), src.ptr, n * itemSize(src.dtype));
  }
  if (src !== t) src.dispose();
  return out;
}

/** `t.item()`: the value of a one-element tensor. */
export function item(t: Tensor): number {
  if (t.numel() !== 1) {
    throw new RangeError(
      `item(): tensor ${formatShape(t.shape)} has ${t.numel()} elements, not 1`,
    );
  }
  t.storage.backend.copyOut(scalarPtr, t.ptr, itemSize(t.dtype));
  // Native memory is little-endian on every platform dtrain builds for.
  if (t.dtype === "bool") return scalar.getUint8(0);
  if (t.dtype === "u16") return scalar.getUint16(0, true);
  if (t.dtype === "bf16") return bf16Value(scalar.getUint16(0, true));
  if (t.dtype === "f16") return scalar.getFloat16(0, true);
  return t.dtype === "f32" ? scalar.getFloat32(0, true) : scalar.getInt32(0, true);
}

/** `t.tolist()`: nested arrays of the elements. */
export function tolist(t: Tensor): number | unknown[] {
  const flat = Array.from(toArray(t));
  if (t.ndim === 0) return flat[0];
  const build = (dim: number, start: number): unknown[] => {
    const out: unknown[] = [];
    const step = shapeSize(t.shape.slice(dim + 1));
    for (let i = 0; i < t.shape[dim]; i++) {
      out.push(dim === t.ndim - 1 ? flat[start + i] : build(dim + 1, start + i * step));
    }
    return out;
  };
  return build(0, 0);
}
