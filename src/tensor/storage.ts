/**
 * Native memory behind tensors, and the rules for giving it back.
 *
 * [Note: tensor lifetime]
 * A tensor's bytes live in memory taken from its device's allocator, which kernels read in place:
 * on cpu an ArrayBuffer's backing store (see [Note: cpu memory is JavaScript memory] in
 * device/cpu.ts), on other devices native memory. Several tensors (views) can share one
 * {@linkcode Storage}; it counts them and frees its block when the last one is disposed. Memory
 * comes back in three ways:
 * 1. `tensor.dispose()` or `using` frees at once (idempotent);
 * 2. `tidy(fn)` disposes every tensor made inside `fn` except what `fn` returns and tensors marked
 *    persistent (parameters, gradients, optimizer state): the deterministic way for training loops;
 * 3. the garbage collector frees tensors that were dropped without either. On cpu V8 frees the
 *    backing store in the collection itself, with no event-loop turn, so a synchronous loop stays
 *    flat. A block V8 cannot see (a device without an `owner`) is freed by a FinalizationRegistry
 *    after a collection, on an event-loop turn, and the allocator asks for collections when such
 *    blocks grow past a watermark (when `--v8-flags=--expose-gc` made `gc` available).
 * Autograd frees its own temporaries (gradients of intermediate results, saved statistics) as soon
 * as a backward pass no longer needs them.
 *
 * [Note: pinned addresses]
 * An owned block lives while its owner is reachable, and a tensor may become unreachable between
 * reading `ptr` and the kernel call that uses it (`kernel(a.ptr, b.ptr)` where `a` is a temporary,
 * and reading `b.ptr` allocates). So each address handed out is a key in a WeakMap whose value is
 * the owner: while the address object is in use, on the stack or in an argument list, the memory
 * it points to stays allocated.
 *
 * [Note: collectives own their tensors]
 * A collective in flight (an awaited `Work`, a started all-gather, an `isend`/`irecv`) reads and
 * writes its tensors' bytes on another thread until it settles. PyTorch's `all_reduce` blocks, so
 * a user coming from it reads the tensor at once and, with no error, sees this rank's own value.
 * So the process group claims each tensor's Storage when it issues a collective and unclaims it
 * when the collective settles (before any `await` of it resumes), and `Tensor.ptr`, which every
 * kernel, copy and host read goes through, throws the claim's error while one is held: a view
 * shares its Storage, so it is covered too. The collectives themselves read their pointers once,
 * when issued, before the claim. The check costs one field read per pointer taken.
 * @module
 */

import {
  allocatedBytesOnAll,
  type DeviceBackend,
  type DeviceBlock,
  type FamilyName,
  getDevice,
} from "./device/mod.ts";
import { insideTidy } from "./scope.ts";

/**
 * Where a tensor's memory lives: a device of a family dtrain ships (`"cpu"`, `"cuda:N"`; see
 * device/family.ts), or of any family registered with `registerDevice` (see [Note: device seam] in
 * device/device.ts).
 */
export type Device = FamilyName | `${FamilyName}:${number}` | (string & Record<never, never>);

/** Frees the blocks of collected storages on devices whose memory V8 cannot see. */
const unowned = new FinalizationRegistry<{ backend: DeviceBackend; block: DeviceBlock }>(
  ({ backend, block }) => block.release !== undefined ? block.release() : backend.free(block),
);

/** Address objects to the owners of the blocks they point into (see [Note: pinned addresses]). */
const pins = new WeakMap<object, object>();

/** Makes `ptr` keep `owner` alive (no-op for unowned blocks). */
function pin(ptr: Deno.PointerValue, owner: object | undefined): Deno.PointerValue {
  if (owner !== undefined && ptr !== null) pins.set(ptr, owner);
  return ptr;
}

/**
 * A collective in flight that owns a storage's bytes (see [Note: collectives own their tensors]).
 */
export interface Claim {
  /**
   * The error for a use of the storage while the collective is in flight.
   *
   * @param what The tensor being used, as `f32 [4]`.
   */
  refuse(what: string): Error;
}

/** A reference-counted block of device memory shared by a tensor and its views. */
export class Storage {
  /** The block's address; null once freed. */
  ptr: Deno.PointerValue;
  /** The block's size in bytes. */
  readonly nbytes: number;
  /** The device holding the block, by its canonical name (`"cuda"` becomes `"cuda:0"`). */
  readonly device: Device;
  /** The device holding the block: its allocator, copies and kernels. */
  readonly backend: DeviceBackend;
  /** Bumped by every in-place write (see [Note: saved-tensor versions] in autograd.ts). */
  version = 0;
  /** The collective in flight that owns the bytes, or null (see [Note: collectives own their tensors]). */
  claimedBy: Claim | null = null;
  /** Further collectives holding the bytes at once (a tensor sent to two peers). */
  #moreClaims: Claim[] | null = null;
  #refs = 0;
  #block: DeviceBlock;
  /** Whether only a collection would free the block if dropped (see [Note: collecting dropped tensors]). */
  #uncovered = false;

  /**
   * Allocates a block on `device`.
   *
   * @param nbytes Bytes to allocate.
   * @param zero Whether to zero-fill them.
   * @param device The device's name (any alias: the storage keeps the canonical one).
   * @param adopt A block allocated elsewhere to use instead (memory shared with other processes),
   *   freed by its `release`.
   */
  constructor(nbytes: number, zero: boolean, device: Device = "cpu", adopt?: DeviceBlock) {
    if (!Number.isSafeInteger(nbytes) || nbytes < 0) {
      throw new RangeError(`cannot allocate ${nbytes} bytes: not a representable size`);
    }
    this.backend = getDevice(device);
    const block = adopt ?? this.backend.alloc(nbytes, zero);
    this.#block = block;
    this.ptr = pin(block.ptr, block.owner);
    this.nbytes = nbytes;
    this.device = this.backend.name;
    notePeak();
    if (block.owner === undefined) {
      unowned.register(this, { backend: this.backend, block }, this);
      maybeCollect();
    } else if (!insideTidy()) {
      this.#uncovered = true;
      noteUncovered(nbytes);
    }
  }

  /**
   * The address `byteOffset` bytes into the block, keeping the block alive while it is in use.
   *
   * @param byteOffset Bytes from the block's start.
   * @returns The address.
   */
  pointerAt(byteOffset: number): Deno.PointerValue {
    if (this.ptr === null) throw new ReferenceError("storage was freed");
    return pin(Deno.UnsafePointer.offset(this.ptr, byteOffset), this.#block.owner);
  }

  /** How many tensors share this block. */
  get refs(): number {
    return this.#refs;
  }

  /** Adds a user (a tensor or view). */
  retain(): void {
    this.#refs++;
  }

  /**
   * Marks the bytes as owned by a collective in flight, until {@linkcode unclaim}.
   *
   * @param claim The collective.
   */
  claim(claim: Claim): void {
    if (this.claimedBy === null) this.claimedBy = claim;
    else (this.#moreClaims ??= []).push(claim);
  }

  /**
   * Ends a claim: the collective has settled.
   *
   * @param claim The collective that settled.
   */
  unclaim(claim: Claim): void {
    const more = this.#moreClaims;
    if (this.claimedBy === claim) {
      this.claimedBy = more?.shift() ?? null;
    } else if (more !== null && more.includes(claim)) {
      more.splice(more.indexOf(claim), 1);
    }
    if (more?.length === 0) this.#moreClaims = null;
  }

  /**
   * Frees the block now but keeps this Storage, and the tensors on it, for {@linkcode reallocate}:
   * FSDP frees a full parameter between its uses while autograd still refers to it.
   */
  freeBlock(): void {
    if (this.ptr === null) return;
    if (this.#block.owner === undefined) unowned.unregister(this);
    this.#free();
    this.ptr = null;
  }

  #free(): void {
    if (this.#block.release !== undefined) this.#block.release();
    else this.backend.free(this.#block);
  }

  /** After {@linkcode freeBlock}: a fresh block of the same size (contents undefined). */
  reallocate(): void {
    if (this.ptr !== null) return;
    const block = this.backend.alloc(this.nbytes, false);
    this.#block = block;
    this.ptr = pin(block.ptr, block.owner);
    notePeak();
    if (block.owner === undefined) unowned.register(this, { backend: this.backend, block }, this);
  }

  /** Drops a user; frees the block when none is left. */
  release(): void {
    if (--this.#refs > 0 || this.ptr === null) return;
    if (this.#block.owner === undefined) unowned.unregister(this);
    if (this.#uncovered) noteUncovered(-this.nbytes);
    this.#free();
    this.ptr = null;
  }
}

/**
 * Bytes held by tensors on every device: all tensors alive, and dropped ones whose collection has
 * not been noticed yet (their finalizers run on an event-loop turn).
 */
export function allocatedBytes(): number {
  return allocatedBytesOnAll();
}

/** The most {@linkcode allocatedBytes} seen at an allocation since the last reset. */
let peakBytes = 0;

/** Raises the peak to the bytes held now (called after each allocation). */
function notePeak(): void {
  const live = allocatedBytesOnAll();
  if (live > peakBytes) peakBytes = live;
}

/**
 * The most bytes tensors held at once since the process started or the last
 * {@linkcode resetPeakAllocatedBytes} (as `torch.cuda.max_memory_allocated`): what the train job's
 * planner predicts, read after each allocation.
 */
export function peakAllocatedBytes(): number {
  return Math.max(peakBytes, allocatedBytesOnAll());
}

/** Starts the peak of {@linkcode peakAllocatedBytes} again from the bytes held now. */
export function resetPeakAllocatedBytes(): void {
  peakBytes = allocatedBytesOnAll();
}

/**
 * [Note: collecting dropped tensors]
 * V8 frees a dropped cpu tensor in its next collection, but left alone it collects only after
 * external memory grew by 64 MiB, and its heap grows between collections: a loop that drops its
 * tensors climbs to a plateau several times its working set. With `gc` available
 * (`--v8-flags=--expose-gc`, as the README runs dtrain), every MiB allocated outside `tidy` and not
 * disposed triggers a young-generation collection (well under a millisecond: temporaries die
 * young), and every 16th of them a full one, which keeps the resident set flat. Memory allocated
 * inside `tidy` does not count, since tidy disposes it, so a loop under `tidy` never collects
 * early.
 */
const COLLECT_AFTER = 2 ** 20;
const FULL_EVERY = 16;
let uncovered = 0;
let collections = 0;

/** Counts bytes that only a collection can free if dropped, and collects per the note above. */
function noteUncovered(nbytes: number): void {
  uncovered += nbytes;
  if (uncovered < COLLECT_AFTER || collect === undefined) return;
  uncovered = 0;
  collect({ type: ++collections % FULL_EVERY === 0 ? "major" : "minor" });
}

let watermark = 256 * 1024 * 1024;
const collect = (globalThis as { gc?: (options?: { type: "minor" | "major" }) => void }).gc;

/** Asks V8 for a collection when memory outgrew the watermark (see the note above). */
function maybeCollect(): void {
  if (collect === undefined) return;
  const live = allocatedBytes();
  if (live < watermark) return;
  collect();
  watermark = Math.max(2 * live, 256 * 1024 * 1024);
}
