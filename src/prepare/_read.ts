/**
 * Reading prepare's inputs as text in blocks, so that memory does not grow with the input: each
 * block ends where a UTF-8 sequence starts, so that decoding the blocks one by one gives the text
 * of decoding the whole file (strictly or with U+FFFD for bad bytes, as Python's `open`).
 * @module
 */

import { notRegularFile } from "../io/regular_file.ts";
import { invalidUtf8At } from "./_utf8.ts";

/** Bytes read per block. */
export const BLOCK_BYTES = 1 << 20;

/** A wrong input; the message names the file and what is wrong (prepare rethrows it as its own). */
export class InputError extends Error {
  /** @param message What is wrong, naming the file. */
  constructor(message: string) {
    super(message);
    this.name = "InputError";
  }
}

/**
 * The length of `bytes[0, length)` that ends at a UTF-8 sequence boundary: the bytes after it are
 * the start of a sequence the next read completes. [Note: aligned blocks] A decoder (WHATWG's,
 * strict or replacing) has nothing pending at such a boundary, whatever the bytes before it, so
 * blocks cut there decode to the pieces of the whole file's text; a sequence never spans 4 bytes
 * after its lead, so looking back 4 bytes finds the lead of any incomplete one.
 */
function alignedLength(bytes: Uint8Array, length: number): number {
  for (let i = length - 1; i >= 0 && i >= length - 4; i--) {
    const byte = bytes[i];
    if ((byte & 0xc0) === 0x80) continue;
    const needed = byte < 0x80 ? 1 : byte >= 0xf0 ? 4 : byte >= 0xe0 ? 3 : byte >= 0xc0 ? 2 : 1;
    return i + needed <= length ? length : i;
  }
  return length;
}

/**
 * The text of the file at `path`, block by block (each block whole code points; a byte-order mark
 * kept as U+FEFF, as Python's `open`).
 *
 * @param path The file.
 * @param errors `"strict"` throws naming the first byte that is not UTF-8; `"replace"` reads such
 *   bytes as U+FFFD.
 * @param blockBytes Bytes per read.
 * @throws InputError for a file that is missing, not a regular file, unreadable or not UTF-8.
 */
export function* readTextBlocks(
  path: string,
  errors: "strict" | "replace",
  blockBytes: number = BLOCK_BYTES,
): Generator<string> {
  let file: Deno.FsFile;
  try {
    const other = notRegularFile(path);
    if (other !== null) throw new InputError(`--input ${path}: is ${other}, not a regular file`);
    file = Deno.openSync(path, { read: true });
  } catch (error) {
    if (error instanceof InputError) throw error;
    const missing = (error as { code?: string }).code === "ENOENT" ||
      error instanceof Deno.errors.NotFound;
    throw new InputError(
      `--input ${path}: ${
        missing ? "no such file" : `cannot read it: ${(error as Error).message}`
      }`,
    );
  }
  const decoder = new TextDecoder("utf-8", { fatal: errors === "strict", ignoreBOM: true });
  const buffer = new Uint8Array(blockBytes + 4);
  let held = 0, offset = 0;
  try {
    for (;;) {
      let read: number | null;
      try {
        read = file.readSync(buffer.subarray(held, held + blockBytes));
      } catch (error) {
        throw new InputError(`--input ${path}: cannot read it: ${(error as Error).message}`);
      }
      const end = held + (read ?? 0);
      const length = read === null ? end : alignedLength(buffer, end);
      if (length > 0) yield decode(decoder, buffer.subarray(0, end), length, path, offset);
      offset += length;
      buffer.copyWithin(0, length, end);
      held = end - length;
      if (read === null) return;
    }
  } finally {
    file.close();
  }
}

/** Decodes `bytes[0, length)`; the bytes after (the next block's start) only show in an error. */
function decode(
  decoder: TextDecoder,
  bytes: Uint8Array,
  length: number,
  path: string,
  offset: number,
): string {
  try {
    return decoder.decode(bytes.subarray(0, length));
  } catch {
    const at = Math.max(invalidUtf8At(bytes.subarray(0, length)), 0);
    const seen = Array.from(bytes.subarray(at, at + 4), (b) => b.toString(16).padStart(2, "0"));
    throw new InputError(
      `--input ${path}: not UTF-8 at byte ${offset + at} (0x${seen.join(" 0x")} ...), where ` +
        "nanoGPT's prepare.py raises UnicodeDecodeError; convert the file to UTF-8, or pass " +
        "--errors replace to read such bytes as U+FFFD",
    );
  }
}
