/**
 * A byte-level text corpus for language models: the bytes of one or more files, split into a
 * training and a validation part, served as blocks of `blockSize + 1` bytes (input and next-byte
 * targets). Debian's `fortunes` package is the default corpus.
 * @module
 */

import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import { tensor } from "../tensor/creation.ts";
import type { Tensor } from "../tensor/tensor.ts";
import { checkIndex, type Dataset } from "./dataset.ts";

/** Where Debian's `fortunes` package installs its fortune files. */
export const FORTUNES_ROOT = "/usr/share/games/fortunes";

/** Options of {@linkcode TextDataset}. */
export interface TextDatasetOptions {
  /** Tokens per sample (the context length). */
  blockSize: number;
  /** Which part of the corpus: "train" (default) or "val". */
  split?: "train" | "val";
  /** The fraction of the bytes, taken from the end, that forms the validation part (default 0.1). */
  valFraction?: number;
  /** Bytes between the starts of consecutive samples (default `blockSize`: no overlap). */
  stride?: number;
}

/**
 * Byte-level language-model samples (vocabulary of 256): sample `i` is the block of
 * `blockSize + 1` bytes starting at byte `i * stride` of the split, as `[x, y]`, both i32
 * `[blockSize]`: x its first `blockSize` bytes, y its last `blockSize` (the next byte of every
 * position, the language-model target). The training part is the
 * first `1 - valFraction` of the bytes, the validation part the rest, so the two never share a
 * byte and every run sees the same samples (shuffling is the sampler's job).
 *
 * @example Next-byte pairs from a string
 * ```ts
 * import assert from "node:assert/strict";
 * import { TextDataset } from "./mod.ts";
 * const data = new TextDataset(new TextEncoder().encode("hello world!"), { blockSize: 4, valFraction: 0 });
 * const [x, y] = data.get(1);
 * assert.equal(data.length, 2);
 * assert.equal(TextDataset.decode(x.toArray()), "o wo");
 * assert.equal(TextDataset.decode(y.toArray()), " wor");
 * ```
 */
export class TextDataset implements Dataset<[Tensor, Tensor]> {
  /** The number of distinct tokens: one per byte value. */
  static readonly vocabSize = 256;
  /** The bytes of this split. */
  readonly bytes: Uint8Array;
  /** Tokens per sample. */
  readonly blockSize: number;
  /** Bytes between sample starts. */
  readonly stride: number;

  /**
   * Creates a `TextDataset`.
   *
   * @param corpus The whole corpus (both splits), as bytes.
   * @param options See {@linkcode TextDatasetOptions}.
   */
  constructor(corpus: Uint8Array, options: TextDatasetOptions) {
    const { blockSize, split = "train", valFraction = 0.1 } = options;
    const stride = options.stride ?? blockSize;
    for (const [name, value] of [["blockSize", blockSize], ["stride", stride]] as const) {
      if (!Number.isInteger(value) || value <= 0) {
        throw new RangeError(`TextDataset: ${name} must be a positive integer, got ${value}`);
      }
    }
    if (split !== "train" && split !== "val") {
      throw new RangeError(`TextDataset: split must be "train" or "val", got "${split}"`);
    }
    if (!(valFraction >= 0 && valFraction < 1)) {
      throw new RangeError(`TextDataset: valFraction must be in [0, 1), got ${valFraction}`);
    }
    const cut = Math.floor(corpus.length * (1 - valFraction));
    this.bytes = split === "train" ? corpus.subarray(0, cut) : corpus.subarray(cut);
    this.blockSize = blockSize;
    this.stride = stride;
    if (this.length === 0) {
      throw new RangeError(
        `TextDataset: the ${split} split has ${this.bytes.length} bytes, fewer than blockSize + 1 ` +
          `(${blockSize + 1}): use a larger corpus or a smaller blockSize`,
      );
    }
  }

  /**
   * The bytes of `paths` concatenated in the given order (any files: UTF-8 text stays bytes).
   * @throws Error naming the file that cannot be read.
   */
  static fromFiles(paths: readonly string[], options: TextDatasetOptions): TextDataset {
    if (paths.length === 0) throw new RangeError("TextDataset.fromFiles: no files given");
    const parts = paths.map((path) => {
      try {
        return readFileSync(path);
      } catch (cause) {
        throw new Error(`TextDataset: cannot read ${path}: ${(cause as Error).message}`, { cause });
      }
    });
    const corpus = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
    parts.reduce((at, p) => (corpus.set(p, at), at + p.length), 0);
    return new TextDataset(corpus, options);
  }

  /**
   * The fortune files of Debian's `fortunes` package (every file in `root` but the `.dat`
   * indexes and the `.u8` links), in name order: about 2.6 MB of English text.
   */
  static fortunes(options: TextDatasetOptions & { root?: string }): TextDataset {
    const root = options.root ?? FORTUNES_ROOT;
    let names: string[];
    try {
      names = readdirSync(root).filter((n) => !n.endsWith(".dat") && !n.endsWith(".u8")).sort();
    } catch (cause) {
      throw new Error(
        `TextDataset.fortunes: cannot list ${root}; install it with \`apt-get install fortunes\`, ` +
          "or pass another root",
        { cause },
      );
    }
    const files = names.map((n) => join(root, n)).filter((p) => statSync(p).isFile());
    if (files.length === 0) {
      throw new Error(`TextDataset.fortunes: no fortune files in ${root}`);
    }
    return TextDataset.fromFiles(files, options);
  }

  /** The number of samples: every start whose block of `blockSize + 1` bytes fits. */
  get length(): number {
    const span = this.bytes.length - (this.blockSize + 1);
    return span < 0 ? 0 : Math.floor(span / this.stride) + 1;
  }

  /** Sample `index`: `[x, y]`, i32 `[blockSize]` each. */
  get(index: number): [Tensor, Tensor] {
    return this.#blocks(Int32Array.of(index), [this.blockSize]);
  }

  /** The samples at `indices`: `[x, y]`, i32 `[indices.length, blockSize]` each. */
  getBatch(indices: Int32Array): [Tensor, Tensor] {
    return this.#blocks(indices, [indices.length, this.blockSize]);
  }

  #blocks(indices: Int32Array, shape: number[]): [Tensor, Tensor] {
    const n = this.blockSize;
    const x = new Int32Array(indices.length * n), y = new Int32Array(indices.length * n);
    indices.forEach((index, row) => {
      checkIndex("TextDataset", index, this.length);
      const start = index * this.stride;
      x.set(this.bytes.subarray(start, start + n), row * n);
      y.set(this.bytes.subarray(start + 1, start + n + 1), row * n);
    });
    return [tensor(x, shape, { dtype: "i32" }), tensor(y, shape, { dtype: "i32" })];
  }

  /** Tokens (byte values) back to text, decoded as UTF-8 (invalid sequences become U+FFFD). */
  static decode(tokens: ArrayLike<number>): string {
    return new TextDecoder().decode(Uint8Array.from(tokens));
  }

  /** Text to tokens: its UTF-8 bytes as i32 values. */
  static encode(text: string): Int32Array {
    return Int32Array.from(new TextEncoder().encode(text));
  }
}
