/**
 * An open safetensors file whose tensors are read on demand, any byte range of one straight into
 * native memory: what `load` reads whole, and what a sharded checkpoint's loader reads piece by
 * piece into the model's own tensors, so that no second copy of the state is ever held.
 * @module
 */

import { notRegularFile } from "../io/regular_file.ts";
import { decodeHeader, MAX_HEADER_BYTES, type TensorEntry } from "./_header.ts";
import { CheckpointError } from "./errors.ts";

/** Tensor bytes move between native memory and the file in pieces of this size. */
export const CHUNK_BYTES = 16 * 1024 * 1024;

/** Calls `visit(view, at)` on consecutive views of `nbytes` of native memory at `ptr`. */
export function forEachChunk(
  ptr: Deno.PointerObject,
  nbytes: number,
  visit: (view: Uint8Array, at: number) => void,
): void {
  for (let at = 0; at < nbytes; at += CHUNK_BYTES) {
    const length = Math.min(CHUNK_BYTES, nbytes - at);
    visit(new Uint8Array(Deno.UnsafePointerView.getArrayBuffer(ptr, length, at)), at);
  }
}

/** Fills `view` from the file's current position; fails if the file ends first. */
function readExactly(path: string, file: Deno.FsFile, view: Uint8Array, what: string): void {
  for (let done = 0; done < view.length;) {
    const n = file.readSync(view.subarray(done));
    if (n === null) {
      throw new CheckpointError(
        path,
        `file ended ${
          view.length - done
        } bytes early while reading ${what} (changed while loading?)`,
      );
    }
    done += n;
  }
}

/** A safetensors file opened for reading, its header checked. Close it (or `using` it). */
export class TensorFile {
  /** The tensors, in data order. */
  readonly entries: TensorEntry[];
  /** `__metadata__`, or `{}` when absent. */
  readonly metadata: Record<string, string>;
  #byName: Map<string, TensorEntry>;
  #file: Deno.FsFile;
  #dataStart: number;

  private constructor(
    readonly path: string,
    file: Deno.FsFile,
    dataStart: number,
    header: { entries: TensorEntry[]; metadata: Record<string, string> },
  ) {
    this.#file = file;
    this.#dataStart = dataStart;
    this.entries = header.entries;
    this.metadata = header.metadata;
    this.#byName = new Map(header.entries.map((e) => [e.name, e]));
  }

  /**
   * Opens `path` (a regular file: a directory or FIFO is named, never read) and reads and checks
   * its header.
   * @throws CheckpointError naming the file and what is wrong with its header.
   */
  static open(path: string): TensorFile {
    const fail = (problem: string): never => {
      throw new CheckpointError(path, problem);
    };
    const other = notRegularFile(path);
    if (other !== null) fail(`is ${other}, expected a safetensors file`);
    const file = Deno.openSync(path, { read: true });
    try {
      const size = file.statSync().size;
      if (size < 8) fail(`file is ${size} bytes, too short for the 8-byte header length`);
      const prefix = new Uint8Array(8);
      readExactly(path, file, prefix, "the header length");
      const headerBytes = new DataView(prefix.buffer).getBigUint64(0, true);
      if (headerBytes > BigInt(MAX_HEADER_BYTES)) {
        fail(`header length ${headerBytes} exceeds the limit of ${MAX_HEADER_BYTES} bytes`);
      }
      const n = Number(headerBytes);
      if (8 + n > size) fail(`header length ${n} runs past the end of the ${size}-byte file`);
      const headerView = new Uint8Array(n);
      readExactly(path, file, headerView, "the header");
      return new TensorFile(path, file, 8 + n, decodeHeader(path, headerView, size - 8 - n));
    } catch (error) {
      file.close();
      throw error;
    }
  }

  /** The entry of tensor `name`, or undefined when the file has none. */
  entry(name: string): TensorEntry | undefined {
    return this.#byName.get(name);
  }

  /**
   * Reads `nbytes` of `entry`'s data from its byte `from` into native memory at `ptr`, which must
   * hold that many bytes.
   */
  readInto(entry: TensorEntry, from: number, ptr: Deno.PointerObject, nbytes: number): void {
    if (from < 0 || from + nbytes > entry.end - entry.begin) {
      throw new RangeError(
        `${this.path}: bytes ${from}..${from + nbytes} are outside tensor ` +
          `${JSON.stringify(entry.name)} (${entry.end - entry.begin} bytes)`,
      );
    }
    if (nbytes === 0) return;
    this.#file.seekSync(this.#dataStart + entry.begin + from, Deno.SeekMode.Start);
    forEachChunk(ptr, nbytes, (view, at) => {
      readExactly(
        this.path,
        this.#file,
        view,
        `tensor ${JSON.stringify(entry.name)} at byte ${from + at}`,
      );
    });
  }

  /** Closes the file. Idempotent. */
  close(): void {
    try {
      this.#file.close();
    } catch (error) {
      if (!(error instanceof Deno.errors.BadResource)) throw error;
    }
  }

  /** `using file = TensorFile.open(...)` closes it at the end of the block. */
  [Symbol.dispose](): void {
    this.close();
  }
}
