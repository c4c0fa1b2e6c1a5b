/**
 * A file mapped read-only into memory through libdtrain (`dt_map_file`, csrc/core/mapped_file.c):
 * token data larger than memory is read a page at a time as it is touched, never copied whole.
 * The mapping is released on purpose, by `dispose`; a FinalizationRegistry is a backstop only.
 * @module
 */

import { resolve } from "node:path";
import { loadDtrain, MapAccess } from "../../ffi/dtrain.ts";

/** How a mapping will be read, the kernel's read-ahead hint: `random` reads only touched pages. */
export type MapAccessName = keyof typeof MapAccess;

/** errno of a missing file or directory (ENOENT, the same on every Linux architecture). */
const ENOENT = 2;

/** Unmaps what a dropped mapping left mapped; a backstop for a forgotten `dispose`. */
const leaked = new FinalizationRegistry<{ ptr: Deno.PointerValue; length: number }>(
  ({ ptr, length }) => loadDtrain().dt_unmap_file(ptr, length),
);

/**
 * Keeps a mapping reachable while any view of its {@linkcode MappedFile.buffer} is: the backstop
 * must never unmap pages a live typed array still reads.
 */
const ownerOfBuffer = new WeakMap<ArrayBuffer, MappedFile>();

/**
 * A whole file mapped read-only and shared: pages come from the page cache on first touch, so the
 * process's resident memory grows only by the pages read. Reads copy out of the mapping; after
 * `dispose` every read throws, and the {@linkcode MappedFile.buffer} handed out is detached
 * (length 0), so no view can reach unmapped memory.
 *
 * A file truncated by another process while mapped ends this one with SIGBUS when a vanished page
 * is read, as with any mapping (np.memmap too): map only files that are no longer written.
 *
 * @example Two bytes from the middle of a file
 * ```ts
 * import assert from "node:assert/strict";
 * import { MappedFile } from "./mapped_file.ts";
 * const path = Deno.makeTempFileSync();
 * Deno.writeFileSync(path, new Uint8Array([1, 2, 3, 4, 5]));
 * using file = MappedFile.open(path);
 * const into = new Uint8Array(2);
 * file.copyInto(into, 2);
 * assert.deepStrictEqual([...into], [3, 4]);
 * assert.equal(file.byteLength, 5);
 * Deno.removeSync(path);
 * ```
 */
export class MappedFile implements Disposable {
  /** The file mapped, as given. */
  readonly path: string;
  /** The file's size when mapped. */
  readonly byteLength: number;
  #ptr: Deno.PointerValue;
  #disposed = false;
  #buffer: ArrayBuffer | null = null;

  private constructor(path: string, ptr: Deno.PointerValue, byteLength: number) {
    this.path = path;
    this.#ptr = ptr;
    this.byteLength = byteLength;
    if (ptr !== null) leaked.register(this, { ptr, length: byteLength }, this);
  }

  /**
   * Maps the whole of `path`.
   *
   * @param path The file.
   * @param access How it will be read: `random` for scattered windows (nanoGPT's get_batch),
   *   `sequential` for a stream (llm.c's shards).
   * @returns The mapping.
   * @throws Deno.errors.NotFound naming the absolute path for a missing file; an Error naming
   *   it and the reason otherwise.
   */
  static open(path: string, access: MapAccessName = "normal"): MappedFile {
    const absolute = resolve(path);
    if (absolute.includes("\0")) throw new TypeError(`${JSON.stringify(path)}: has a NUL byte`);
    const lib = loadDtrain();
    const ptrOut = new BigUint64Array(1), lengthOut = new BigInt64Array(1);
    const errnoOut = new Int32Array(1);
    const status = lib.dt_map_file(
      new TextEncoder().encode(`${absolute}\0`),
      MapAccess[access],
      ptrOut,
      lengthOut,
      errnoOut,
    );
    if (status !== 0) {
      const message = lastError();
      if (errnoOut[0] === ENOENT) throw new Deno.errors.NotFound(`${absolute}: no such file`);
      throw new Error(message || `${absolute}: cannot map it (status ${status})`);
    }
    const ptr = Deno.UnsafePointer.create(ptrOut[0]);
    return new MappedFile(path, ptr, Number(lengthOut[0]));
  }

  /** Whether {@linkcode MappedFile.dispose} has released the mapping. */
  get disposed(): boolean {
    return this.#disposed;
  }

  /**
   * Copies `into.byteLength` bytes of the file from byte `at`: only the pages they span are read.
   *
   * @param into Where the bytes go (any typed array; its whole extent is filled).
   * @param at The file offset of the first byte.
   * @throws RangeError when the bytes are not all in the file; Error once disposed.
   */
  copyInto(into: ArrayBufferView<ArrayBuffer>, at: number): void {
    const length = into.byteLength;
    this.#checkLive("copyInto");
    if (!Number.isSafeInteger(at) || at < 0 || at + length > this.byteLength) {
      throw new RangeError(
        `${this.path}: bytes [${at}, ${at + length}) are not in the file of ${this.byteLength}`,
      );
    }
    if (length === 0) return;
    const bytes = new Uint8Array(into.buffer, into.byteOffset, length);
    Deno.UnsafePointerView.copyInto(this.#ptr!, bytes, at);
  }

  /**
   * The whole mapping as one ArrayBuffer (made on first call; a view of the pages, not a copy).
   * It is detached (length 0) by `dispose`. Prefer {@linkcode MappedFile.copyInto}: V8 counts a
   * large external buffer against its heap and collects more often while one is alive. Never
   * transfer it: the new owner would outlive the mapping.
   *
   * @returns The buffer, `byteLength` bytes.
   * @throws Error once disposed.
   */
  buffer(): ArrayBuffer {
    this.#checkLive("buffer");
    if (this.#buffer === null) {
      this.#buffer = this.#ptr === null
        ? new ArrayBuffer(0)
        : Deno.UnsafePointerView.getArrayBuffer(this.#ptr, this.byteLength);
      ownerOfBuffer.set(this.#buffer, this);
    }
    return this.#buffer;
  }

  /** Unmaps the file and detaches the buffer handed out; idempotent. */
  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    // Detached first: a view left over now reads as empty instead of faulting on unmapped pages.
    if (this.#buffer !== null && !this.#buffer.detached) this.#buffer.transfer(0);
    this.#buffer = null;
    if (this.#ptr === null) return;
    leaked.unregister(this);
    const status = loadDtrain().dt_unmap_file(this.#ptr, this.byteLength);
    this.#ptr = null;
    if (status !== 0) throw new Error(lastError());
  }

  /** `using file = MappedFile.open(...)` unmaps it at the end of the block. */
  [Symbol.dispose](): void {
    this.dispose();
  }

  #checkLive(op: string): void {
    if (this.#disposed) {
      throw new Error(`${op}: ${this.path} was unmapped by dispose(); open it again to read it`);
    }
  }
}

const messageBuffer = new Uint8Array(512);

/** libdtrain's last error message on this thread. */
function lastError(): string {
  const length = loadDtrain().dt_last_error(messageBuffer, messageBuffer.length);
  return new TextDecoder().decode(
    messageBuffer.subarray(0, Math.min(length, messageBuffer.length - 1)),
  );
}
