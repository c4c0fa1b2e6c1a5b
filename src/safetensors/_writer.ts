/**
 * Writing a safetensors file from tensors' bytes wherever they are (a tensor's own memory, a box
 * copied out of one, a staged block another thread holds), one at a time. It knows no tensor
 * code, so that a checkpoint's background writer (checkpoint/_writer_worker.ts) starts quickly.
 * @module
 */

import { writeFileAtomic } from "../io/private_files.ts";
import { writeAll } from "../io/write_all.ts";
import type { DType } from "../tensor/dtype.ts";
import { encodeHeader, layout } from "./_header.ts";
import { forEachChunk } from "./_tensor_file.ts";

/**
 * One tensor to write with {@linkcode saveBytes}: its name, dtype and shape, and its row-major
 * bytes, produced only when its turn comes (a box copied out of a larger tensor, a staged block
 * another thread holds), so that a save never holds more than one such copy at a time.
 */
export interface TensorBytes {
  /** The tensor's name in the file. */
  name: string;
  /** Its element type. */
  dtype: DType;
  /** Its dimensions. */
  shape: readonly number[];
  /** Calls `write` once with the address of its row-major bytes in host memory. */
  withBytes(write: (ptr: Deno.PointerObject | null) => void): void;
}

/**
 * Writes a safetensors file as {@linkcode save} does (atomically, laid out as the reference
 * implementation lays it out), each tensor's bytes taken from its source in turn.
 *
 * @param path The file to create or replace.
 * @param sources The tensors, checked by the caller (names unique, none `__metadata__`).
 * @param metadata `__metadata__`, when given.
 */
export function saveBytes(
  path: string,
  sources: readonly TensorBytes[],
  metadata?: Record<string, string>,
): void {
  const byName = new Map(sources.map((s) => [s.name, s]));
  const entries = layout(sources.map(({ name, dtype, shape }) => ({ name, dtype, shape })));
  const header = encodeHeader(entries, metadata);
  writeFileAtomic(path, (file) => {
    const prefix = new Uint8Array(8 + header.length);
    new DataView(prefix.buffer).setBigUint64(0, BigInt(header.length), true);
    prefix.set(header, 8);
    writeAll(file, prefix);
    for (const entry of entries) {
      byName.get(entry.name)!.withBytes((ptr) => {
        if (ptr !== null) forEachChunk(ptr, entry.end - entry.begin, (v) => writeAll(file, v));
      });
    }
  });
}
