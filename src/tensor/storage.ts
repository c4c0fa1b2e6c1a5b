/**
 * Native memory behind tensors, and the rules for giving it back.
 *
 * [Note: tensor lifetime]
 * A tensor's bytes live in native memory taken from its device's allocator (libdtrain's on cpu),
 * never in the V8 heap, so kernels read them in place. Several tensors (views) can share one {@linkcode Storage}; it
 * counts them and frees its block when the last one is disposed. Memory comes back in three ways:
 * 1. `tensor.dispose()` or `using` frees at once (idempotent);
 * 2. `tidy(fn)` disposes every tensor made inside `fn` except what `fn` returns and tensors marked
 *    persistent (parameters, gradients, optimizer state): the deterministic way for training loops;
 * 3. a FinalizationRegistry frees tensors that were dropped without either, after a garbage
 *    collection. V8 cannot see native bytes, so the allocator asks for a collection when the live
 *    total has grown past a watermark (when `--v8-flags=--expose-gc` made `gc` available).
 * Autograd frees its own temporaries (gradients of intermediate results, saved statistics) as soon
 * as a backward pass no longer needs them.
 * @module
 */

import type { DeviceBackend } from "./device/device.ts";
import { allocatedBytesOnAll, getDevice } from "./device/registry.ts";

/**
 * Where a tensor's memory lives: `"cpu"`, `"cuda:N"` once a GPU device is registered, or the name
 * of any device registered with `registerDevice` (see [Note: device seam] in device/device.ts).
 */
export type Device = "cpu" | `cuda:${number}` | (string & Record<never, never>);

/** A reference-counted block of native memory shared by a tensor and its views. */
export class Storage {
  /** The block's address; null once freed. */
  ptr: Deno.PointerValue;
  /** The block's size in bytes. */
  readonly nbytes: number;
  /** The device holding the block, by name. */
  readonly device: Device;
  /** The device holding the block: its allocator, copies and kernels. */
  readonly backend: DeviceBackend;
  /** Bumped by every in-place write (see [Note: saved-tensor versions] in autograd.ts). */
  version = 0;
  #refs = 0;

  /**
   * @param nbytes Bytes to allocate.
   * @param zero Whether to zero-fill them.
   * @param device The device's name.
   */
  constructor(nbytes: number, zero: boolean, device: Device = "cpu") {
    if (!Number.isSafeInteger(nbytes) || nbytes < 0) {
      throw new RangeError(`cannot allocate ${nbytes} bytes: not a representable size`);
    }
    this.backend = getDevice(device);
    maybeCollect(nbytes);
    this.ptr = this.backend.alloc(nbytes, zero);
    this.nbytes = nbytes;
    this.device = device;
  }

  /** How many tensors share this block. */
  get refs(): number {
    return this.#refs;
  }

  /** Adds a user (a tensor or view). */
  retain(): void {
    this.#refs++;
  }

  /** Drops a user; frees the block when none is left. */
  release(): void {
    if (--this.#refs > 0 || this.ptr === null) return;
    this.backend.free(this.ptr);
    this.ptr = null;
  }
}

/** Bytes currently allocated by the native library (all tensors alive, on every device). */
export function allocatedBytes(): number {
  return allocatedBytesOnAll();
}

let watermark = 256 * 1024 * 1024;
const collect = (globalThis as { gc?: () => void }).gc;

/** Asks V8 for a collection when native memory outgrew the watermark (see the note above). */
function maybeCollect(incoming: number): void {
  if (collect === undefined) return;
  const live = allocatedBytes() + incoming;
  if (live < watermark) return;
  collect();
  watermark = Math.max(2 * live, 256 * 1024 * 1024);
}
