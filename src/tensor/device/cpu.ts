/**
 * The cpu device: memory from JavaScript ArrayBuffers, and libdtrain's kernels (OpenBLAS for
 * matrix products). The kernel table holds the FFI functions themselves (kernels.ts binds them),
 * so the hot paths cost one native call, as before the seam existed.
 * @module
 */

import { type DtrainSymbols, loadDtrain, Status } from "../../../ffi/dtrain.ts";
import { NativeArgumentError, NativeError } from "../native.ts";
import type { DeviceBackend, DeviceBlock } from "./device.ts";
import { bindKernels } from "./kernels.ts";

/**
 * [Note: cpu memory is JavaScript memory]
 * A cpu tensor's bytes are an ArrayBuffer's backing store, handed to the kernels by address
 * (`Deno.UnsafePointer.of`). V8 counts backing stores as external memory and collects when they
 * grow, and it frees the store of an unreachable ArrayBuffer in that collection: no event-loop
 * turn is needed, so a synchronous training loop that never calls `tidy` or `dispose` stays flat
 * (memory from a native allocator would wait for a FinalizationRegistry callback, which only runs
 * between macrotasks). Backing stores never move, so an address holds while its ArrayBuffer is
 * reachable: the Storage keeps it (the block's `owner`), and collectives and loaders that hand the
 * address to another thread keep the Storage. `free` keeps the buffer for reuse (see `pool`), or
 * gives the store back at once with `transfer(0)`, which detaches the buffer. Live bytes are counted here: added on `alloc`,
 * subtracted on `free`, or by a FinalizationRegistry once a dropped buffer was collected (its
 * callback waits for an event-loop turn, so until then `allocatedBytes` counts collected blocks
 * and each waiting registration holds a few dozen bytes of heap). When V8 collects is up to it,
 * helped by storage.ts (see [Note: collecting dropped tensors] there).
 */

/** Block alignment: a cache line, and the widest vector (AVX-512) the kernels load. */
const ALIGN = 64;
let liveBytes = 0;
const collected = new FinalizationRegistry<number>((nbytes) => {
  liveBytes -= nbytes;
});

/**
 * Disposed buffers by byte length, reused by the next allocation of that size: a loop under `tidy`
 * allocates the same sizes every step, and a reused buffer skips the allocator, the fresh pages'
 * faults, and the zero-fill when none is asked for (a training step took 4-9% more CPU time
 * without this). The pool holds up to the most bytes that were ever live at once (at least
 * {@linkcode POOL_MIN}, at most {@linkcode POOL_MAX}): memory the process needed at its peak
 * anyway; a 64 MiB pool made the benchmark GPT zero-fill 40 MiB of fresh buffers every step, this
 * one none. A workload whose sizes keep changing can hold up to twice its peak (pooled buffers of
 * old sizes beside live ones of new sizes), as a size-keyed cache does. Beyond the limit, disposal
 * gives the memory back at once. Buffers the garbage collector frees never come here.
 */
const pool = new Map<number, ArrayBuffer[]>();
const POOL_MIN = 64 * 2 ** 20;
const POOL_MAX = 2 ** 30;
let pooledBytes = 0;
let peakLiveBytes = 0;

/** How many bytes may wait in the pool (see the note above). */
function poolLimit(): number {
  return Math.min(Math.max(peakLiveBytes, POOL_MIN), POOL_MAX);
}

/** A fresh (zero-filled) or reused buffer of `size` bytes. */
function takeBuffer(size: number, zero: boolean): ArrayBuffer {
  const reused = pool.get(size)?.pop();
  if (reused !== undefined) {
    pooledBytes -= size;
    if (zero) new Uint8Array(reused).fill(0);
    return reused;
  }
  try {
    return new ArrayBuffer(size);
  } catch (cause) {
    throw new NativeError(
      Status.ENOMEM,
      `cpu: out of memory allocating ${size - ALIGN} bytes (${(cause as Error).message})`,
    );
  }
}

/** A block of `nbytes` in an ArrayBuffer, its address aligned to {@linkcode ALIGN}. */
function allocBuffer(nbytes: number, zero: boolean): DeviceBlock {
  // ALIGN spare bytes: room to align, and never an empty buffer (whose address is null).
  const buffer = takeBuffer(nbytes + ALIGN, zero);
  const base = Deno.UnsafePointer.of(buffer);
  const skip = (ALIGN - Number(Deno.UnsafePointer.value(base)) % ALIGN) % ALIGN;
  liveBytes += nbytes;
  if (liveBytes > peakLiveBytes) peakLiveBytes = liveBytes;
  collected.register(buffer, nbytes, buffer);
  return { ptr: skip === 0 ? base : Deno.UnsafePointer.offset(base!, skip), owner: buffer };
}

/** Gives a block back now: to the pool, or to the system (its ArrayBuffer detached). */
function freeBuffer(block: DeviceBlock): void {
  const buffer = block.owner as ArrayBuffer;
  if (buffer.detached) return;
  liveBytes -= buffer.byteLength - ALIGN;
  collected.unregister(buffer);
  if (pooledBytes + buffer.byteLength > poolLimit()) {
    buffer.transfer(0);
    return;
  }
  pooledBytes += buffer.byteLength;
  const sameSize = pool.get(buffer.byteLength);
  if (sameSize === undefined) pool.set(buffer.byteLength, [buffer]);
  else sameSize.push(buffer);
}

const messageBuffer = new Uint8Array(512);

/** The calling thread's last libdtrain error message. */
function lastError(lib: DtrainSymbols): string {
  const length = lib.dt_last_error(messageBuffer, messageBuffer.length);
  return new TextDecoder().decode(
    messageBuffer.subarray(0, Math.min(length, messageBuffer.length - 1)),
  );
}

/**
 * Throws libdtrain's error for a status unless it is OK: a RangeError (`NativeArgumentError`) for
 * bad arguments, a `NativeError` with the status otherwise, with the calling thread's message.
 *
 * @param lib The opened libdtrain.
 * @param status A status one of its functions returned.
 */
export function checkDtrain(lib: DtrainSymbols, status: number): void {
  if (status === Status.OK) return;
  if (status === Status.EINVAL) throw new NativeArgumentError(lastError(lib));
  throw new NativeError(status, lastError(lib));
}

/**
 * Makes the cpu device (called once, by the registry, on the first cpu tensor); this is where
 * `libdtrain.so` is opened.
 */
export function createCpuDevice(): DeviceBackend {
  const lib = loadDtrain();
  const check = (status: number): void => checkDtrain(lib, status);
  const copy = (dst: Deno.PointerValue, src: Deno.PointerValue, nbytes: number): void => {
    check(lib.dt_copy(dst, src, nbytes));
  };
  return {
    name: "cpu",
    isHostMemory: true,
    kernels: bindKernels(lib),
    alloc: allocBuffer,
    free: freeBuffer,
    allocatedBytes: () => liveBytes,
    // Host memory is device memory here: every copy is one memcpy, done at once.
    copyIn: copy,
    copyOut: copy,
    copyInAsync(copies) {
      for (const { dst, src, nbytes } of copies) copy(dst, src, nbytes);
    },
    copy,
    check,
  };
}

/**
 * Sets how many threads the cpu kernels use (libdtrain's pool and OpenBLAS).
 *
 * @param n A positive integer (checked by the caller).
 */
export function setCpuThreads(n: number): void {
  loadDtrain().dt_set_num_threads(n);
}

/** How many threads the cpu kernels use. */
export function getCpuThreads(): number {
  return loadDtrain().dt_get_num_threads();
}
