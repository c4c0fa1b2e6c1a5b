/**
 * The IDX format of the MNIST family (LeCun's `*-idx3-ubyte` files), read from its gzip form: a
 * 4-byte magic (0, 0, element type, rank), big-endian 32-bit dimensions, then the elements.
 * Only unsigned bytes (type 0x08) are read, which is what the MNIST family stores.
 * @module
 */

import { gunzipSync } from "node:zlib";

/** Magic of an IDX file of unsigned bytes with one dimension (labels). */
export const IDX_LABELS = 0x00000801;
/** Magic of an IDX file of unsigned bytes with three dimensions (images). */
export const IDX_IMAGES = 0x00000803;

/** An IDX array: its dimensions and its elements, row-major. */
export interface IdxArray {
  /** The dimensions, outermost first. */
  dims: number[];
  /** The elements (a view into the decompressed file). */
  data: Uint8Array;
}

const hex = (n: number) => `0x${n.toString(16).padStart(8, "0")}`;

/**
 * Parses an uncompressed IDX file of unsigned bytes.
 *
 * @param bytes The file's contents.
 * @param magic The magic expected (`IDX_IMAGES`, `IDX_LABELS`, or 0x0800 + rank).
 * @param source The file's name, for error messages.
 * @returns The dimensions and the elements.
 * @throws Error naming `source` when the magic differs or the size disagrees with the dimensions.
 */
export function parseIdx(bytes: Uint8Array, magic: number, source: string): IdxArray {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (bytes.length < 4) {
    throw new Error(`${source}: truncated IDX file (${bytes.length} bytes, no header)`);
  }
  const seen = view.getUint32(0);
  if (seen !== magic) {
    throw new Error(`${source}: bad IDX magic ${hex(seen)}, expected ${hex(magic)}`);
  }
  const rank = magic & 0xff, header = 4 + 4 * rank;
  if (bytes.length < header) {
    throw new Error(
      `${source}: truncated IDX file (${bytes.length} bytes, the header needs ${header})`,
    );
  }
  const dims = Array.from({ length: rank }, (_, d) => view.getUint32(4 + 4 * d));
  const size = dims.reduce((a, b) => a * b, 1);
  if (bytes.length - header !== size) {
    const what = bytes.length - header < size ? "truncated IDX file" : "IDX file too long";
    throw new Error(
      `${source}: ${what}: dimensions [${dims.join(", ")}] need ${size} bytes of data, ` +
        `found ${bytes.length - header}`,
    );
  }
  return { dims, data: bytes.subarray(header) };
}

/**
 * Reads and parses a gzip-compressed IDX file of unsigned bytes (such as
 * `train-images-idx3-ubyte.gz`).
 *
 * @param path The `.gz` file.
 * @param magic The magic expected (`IDX_IMAGES` or `IDX_LABELS`).
 * @returns The dimensions and the elements.
 * @throws Error naming `path` when it is missing, not gzip, truncated, or not the IDX expected.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { FASHION_MNIST_ROOT, IDX_LABELS, readIdx } from "./mod.ts";
 * const labels = readIdx(`${FASHION_MNIST_ROOT}/t10k-labels-idx1-ubyte.gz`, IDX_LABELS);
 * assert.deepEqual(labels.dims, [10000]);
 * ```
 */
export function readIdx(path: string, magic: number): IdxArray {
  let compressed: Uint8Array;
  try {
    compressed = Deno.readFileSync(path);
  } catch (cause) {
    const reason = cause instanceof Deno.errors.NotFound ? "file not found" : String(cause);
    throw new Error(`${path}: ${reason}`, { cause });
  }
  let bytes: Uint8Array;
  try {
    bytes = gunzipSync(compressed);
  } catch (cause) {
    throw new Error(
      `${path}: not a valid gzip file (${(cause as Error).message})`,
      { cause },
    );
  }
  return parseIdx(bytes, magic, path);
}
