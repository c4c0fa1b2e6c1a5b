/**
 * In-place writes into existing tensors (no autograd): fills, copies, axpy and scaling. Each
 * bumps the storage's version (see [Note: saved-tensor versions] in autograd.ts) and runs on the
 * tensor's device.
 * @module
 */

import { DTypeCode, UnaryOp } from "./device/device.ts";
import { isGradEnabled } from "./grad_mode.ts";
import { formatShape, sameShape } from "./layout.ts";
import { isHalf, itemSize, refuseStorageOnly } from "./dtype.ts";
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
  const device = t.storage.backend;
  if (isHalf(t.dtype)) {
    // No 2-byte fill kernel: `value` filled in f32 and rounded by the one conversion kernel.
    const wide = t.newEmpty(t.shape, { dtype: "f32" });
    try {
      device.check(device.kernels.fillF32(wide.ptr, t.numel(), value));
      device.check(device.kernels.castF32Half(wide.ptr, t.ptr, t.numel(), DTypeCode[t.dtype]));
    } finally {
      wide.dispose();
    }
    return;
  }
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

/** `t.add_(other, alpha)`: t += alpha * other (f32, same shape and device). */
export function addScaled(t: Tensor, other: Tensor, alpha: number): void {
  checkInPlace(t, "add_");
  if (other.dtype !== "f32" || t.dtype !== "f32" || !sameShape(other.shape, t.shape)) {
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
  const src = other.isContiguous() ? other : other.detach().contiguous();
  device.check(device.kernels.axpy(t.ptr, src.ptr, t.numel(), alpha));
  if (src !== other) src.dispose();
}

/** `t.mul_(value)`: t *= value (f32). */
export function scale(t: Tensor, value: number): void {
  if (t.dtype !== "f32") {
    throw new TypeError(`mul_: expected an f32 tensor, got ${t.dtype}`);
  }
  checkInPlace(t, "mul_");
  const device = t.storage.backend;
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
