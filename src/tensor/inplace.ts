/**
 * In-place writes into existing tensors (no autograd): fills, copies, axpy and scaling. Each
 * bumps the storage's version (see [Note: saved-tensor versions] in autograd.ts) and runs on the
 * tensor's device.
 * @module
 */

import { DTypeCode, UnaryOp } from "./device/device.ts";
import { isGradEnabled } from "./grad_mode.ts";
import { formatShape, sameShape } from "./layout.ts";
import {
  type FloatDType,
  type HalfDType,
  isFloat,
  isHalf,
  itemSize,
  refuseStorageOnly,
} from "./dtype.ts";
import type { Tensor } from "./tensor.ts";

/** Refuses tensors autograd tracks (under grad mode) and non-contiguous ones; bumps the version. */
export function checkInPlace(t: Tensor, op: string): void {
  if (t.requiresGrad && isGradEnabled()) {
    throw new Error(
      `${op}: a tensor that requires grad is used in an in-place operation; wrap it in noGrad()`,
    );
  }
  if (!t.isContiguous()) {
    throw new Error(`${op}: in-place operations need a contiguous tensor`);
  }
  t.storage.version++;
}

/** Fills contiguous `t` with `value` (no version check: also used on fresh tensors). */
export function fillRaw(t: Tensor, value: number): void {
  refuseStorageOnly("fill_", t.dtype);
  if (isHalf(t.dtype)) return updateHalf(t, (wide) => fillRaw(wide, value), false);
  const device = t.storage.backend;
  device.check(
    t.dtype === "f32"
      ? device.kernels.fillF32(t.ptr, t.numel(), value)
      : t.dtype === "i32"
      ? device.kernels.fillI32(t.ptr, t.numel(), value)
      : device.kernels.fillU8(t.ptr, t.numel(), value ? 1 : 0),
  );
}

/** `t.fill_(value)`. */
export function fill(t: Tensor, value: number): void {
  checkInPlace(t, "fill_");
  fillRaw(t, value);
}

/** `dst.copy_(src)`: same shape and dtype, from any device. */
export function copy(dst: Tensor, src: Tensor): void {
  checkInPlace(dst, "copy_");
  if (src.dtype !== dst.dtype || !sameShape(src.shape, dst.shape)) {
    throw new RangeError(
      `copy_: source ${src.dtype} ${formatShape(src.shape)} does not match ${dst.dtype} ${
        formatShape(dst.shape)
      }`,
    );
  }
  copyInto(dst, src);
}

/**
 * Runs `update` on an f32 copy of contiguous half `t` and rounds the result back into `t`, as
 * PyTorch's in-place ops on bf16 and f16 compute in float and round once (`read` false skips
 * loading `t`'s values, for a fill).
 */
export function updateHalf(t: Tensor, update: (wide: Tensor) => void, read = true): void {
  const device = t.storage.backend;
  const n = t.numel(), code = DTypeCode[t.dtype as HalfDType];
  const wide = t.newEmpty(t.shape, { dtype: "f32" });
  try {
    if (read) device.check(device.kernels.castHalfF32(t.ptr, code, wide.ptr, n));
    update(wide);
    device.check(device.kernels.castF32Half(wide.ptr, t.ptr, n, code));
  } finally {
    wide.dispose();
  }
}

/** Contiguous `t` as f32: itself, or a new copy of a half tensor's values. */
export function wideCopy(t: Tensor): Tensor {
  if (!isHalf(t.dtype)) return t;
  const wide = t.newEmpty(t.shape, { dtype: "f32" });
  const device = t.storage.backend;
  device.check(
    device.kernels.castHalfF32(t.ptr, DTypeCode[t.dtype as HalfDType], wide.ptr, t.numel()),
  );
  return wide;
}

/** Contiguous `t` (f32, bf16 or f16) as a new tensor of another float dtype, outside autograd. */
export function castFloat(t: Tensor, dtype: FloatDType): Tensor {
  const wide = wideCopy(t);
  if (dtype === "f32") return wide === t ? cloneRaw(t) : wide;
  const out = t.newEmpty(t.shape, { dtype });
  const device = t.storage.backend;
  device.check(device.kernels.castF32Half(wide.ptr, out.ptr, t.numel(), DTypeCode[dtype]));
  if (wide !== t) wide.dispose();
  return out;
}

function cloneRaw(t: Tensor): Tensor {
  const out = t.newEmpty(t.shape);
  copyInto(out, t);
  return out;
}

/**
 * `t.add_(other, alpha)`: t += alpha * other (same shape and device; f32, or bf16/f16 in f32
 * rounded once).
 */
export function addScaled(t: Tensor, other: Tensor, alpha: number): void {
  checkInPlace(t, "add_");
  if (!isFloat(other.dtype) || !isFloat(t.dtype) || !sameShape(other.shape, t.shape)) {
    throw new RangeError(
      `add_: ${other.dtype} ${formatShape(other.shape)} does not match ${t.dtype} ${
        formatShape(t.shape)
      }`,
    );
  }
  if (other.device !== t.device) {
    throw new Error(`add_: tensors on different devices (${t.device} and ${other.device})`);
  }
  const device = t.storage.backend;
  const packed = other.isContiguous() ? other : other.detach().contiguous();
  const src = wideCopy(packed);
  if (isHalf(t.dtype)) {
    updateHalf(t, (wide) => device.check(device.kernels.axpy(wide.ptr, src.ptr, t.numel(), alpha)));
  } else device.check(device.kernels.axpy(t.ptr, src.ptr, t.numel(), alpha));
  if (src !== packed) src.dispose();
  if (packed !== other) packed.dispose();
}

/** `t.mul_(value)`: t *= value (f32). */
export function scale(t: Tensor, value: number): void {
  if (t.dtype !== "f32" && !isHalf(t.dtype)) {
    throw new TypeError(`mul_: expected a floating-point tensor, got ${t.dtype}`);
  }
  checkInPlace(t, "mul_");
  const device = t.storage.backend;
  if (isHalf(t.dtype)) {
    return updateHalf(
      t,
      (w) => device.check(device.kernels.unary(UnaryOp.scale, w.ptr, w.ptr, w.numel(), value)),
    );
  }
  device.check(device.kernels.unary(UnaryOp.scale, t.ptr, t.ptr, t.numel(), value));
}

/**
 * Copies `src`'s elements into contiguous `dst` (same shape and dtype). Across devices the bytes
 * go through the seam: into or out of host memory with the other device's `copyIn`/`copyOut`,
 * between two devices of their own memory through a host staging block.
 */
export function copyInto(dst: Tensor, src: Tensor): void {
  if (!src.isContiguous()) {
    const device = src.storage.backend;
    if (dst.device === src.device) {
      device.check(device.kernels.copyStrided(
        src.ptr,
        dst.ptr,
        src.ndim,
        new BigInt64Array(src.shape.map(BigInt)),
        new BigInt64Array(src.strides.map(BigInt)),
        itemSize(src.dtype),
      ));
      return;
    }
    const packed = src.detach().contiguous();
    copyInto(dst, packed);
    packed.dispose();
    return;
  }
  const nbytes = src.numel() * itemSize(src.dtype);
  if (nbytes === 0) return;
  const from = src.storage.backend, to = dst.storage.backend;
  if (from === to) from.copy(dst.ptr, src.ptr, nbytes);
  else if (from.isHostMemory) to.copyIn(dst.ptr, src.ptr, nbytes);
  else if (to.isHostMemory) from.copyOut(dst.ptr, src.ptr, nbytes);
  else {
    const staging = new Uint8Array(nbytes);
    from.copyOut(Deno.UnsafePointer.of(staging), src.ptr, nbytes);
    to.copyIn(dst.ptr, Deno.UnsafePointer.of(staging), nbytes);
  }
}
