/**
 * nanoGPT's token files (`train.bin`, `val.bin`, written by `data/<name>/prepare.py`): uint16
 * little-endian token ids with no header, read whole once, and served as nanoGPT's `get_batch`
 * serves them.
 * @module
 */

import { notRegularFile } from "../io/regular_file.ts";
import { tensor } from "../tensor/creation.ts";
import { randintNumbers } from "../tensor/random.ts";
import type { Device } from "../tensor/storage.ts";
import type { Tensor } from "../tensor/tensor.ts";
import { checkPositive, windowBatch } from "./_token_batch.ts";

/** Options of {@linkcode TokenFile.getBatch} and {@linkcode TokenFile.batchAt}. */
export interface TokenBatchOptions {
  /** Where `x` and `y` go ("cpu" unless said otherwise). */
  device?: Device;
}

/** An Error naming the file that could not be read, and why (a missing file says so). */
export function unreadable(path: string, error: unknown): Error {
  const reason = error instanceof Deno.errors.NotFound ? "no such file" : String(error);
  return new Error(`${path}: cannot read it (${reason})`, { cause: error });
}

/**
 * Refuses, naming it, a token file path that is not a regular file: read as one, a directory
 * fails with an `IsADirectory` that names no path, and a FIFO blocks.
 *
 * @param path The file about to be read.
 * @throws Error naming the path: missing, unreadable, or a directory, FIFO or device.
 */
export function checkTokenFile(path: string): void {
  let other: string | null;
  try {
    other = notRegularFile(path);
  } catch (error) {
    throw unreadable(path, error);
  }
  if (other !== null) throw new Error(`${path}: is ${other}, expected a file of tokens`);
}

/**
 * The tokens of one nanoGPT `.bin` file, held in memory as the file's bytes (one read; batches
 * copy only their windows).
 *
 * @example A batch as nanoGPT's get_batch draws it
 * ```ts
 * import assert from "node:assert/strict";
 * import { data, manualSeed } from "../../mod.ts";
 * const path = Deno.makeTempFileSync({ suffix: ".bin" });
 * Deno.writeFileSync(path, new Uint8Array(new Uint16Array([5, 6, 7, 8, 9, 10]).buffer));
 * const tokens = await data.TokenFile.open(path);
 * assert.equal(tokens.length, 6);
 * manualSeed(1337);
 * const [x, y] = tokens.getBatch(2, 3);
 * assert.deepStrictEqual(x.shape, [2, 3]);
 * assert.deepStrictEqual(y.toArray(), x.toArray().map((v) => v + 1));
 * Deno.removeSync(path);
 * ```
 */
export class TokenFile {
  /** The file read. */
  readonly path: string;
  /** The token ids, a view of the file's bytes. */
  readonly tokens: Uint16Array;

  private constructor(path: string, bytes: Uint8Array) {
    this.path = path;
    if (bytes.byteLength % 2 !== 0) {
      throw new RangeError(
        `${path}: ${bytes.byteLength} bytes is not a whole number of uint16 tokens ` +
          "(a nanoGPT .bin file holds 2 bytes per token)",
      );
    }
    // A fresh buffer from readFile starts 2-aligned; copy otherwise (a view needs alignment).
    const aligned = bytes.byteOffset % 2 === 0 ? bytes : bytes.slice();
    this.tokens = new Uint16Array(aligned.buffer, aligned.byteOffset, aligned.byteLength / 2);
  }

  /**
   * Reads a nanoGPT token file (uint16 little-endian, no header).
   *
   * @param path The `.bin` file.
   * @returns Its tokens.
   * @throws Error naming the file when it cannot be read or has an odd byte length.
   */
  static async open(path: string): Promise<TokenFile> {
    checkTokenFile(path);
    let bytes: Uint8Array;
    try {
      bytes = await Deno.readFile(path);
    } catch (error) {
      throw unreadable(path, error);
    }
    return new TokenFile(path, bytes);
  }

  /** {@linkcode TokenFile.open} without the wait. */
  static openSync(path: string): TokenFile {
    checkTokenFile(path);
    let bytes: Uint8Array;
    try {
      bytes = Deno.readFileSync(path);
    } catch (error) {
      throw unreadable(path, error);
    }
    return new TokenFile(path, bytes);
  }

  /** The number of tokens (`len(data)` in nanoGPT). */
  get length(): number {
    return this.tokens.length;
  }

  /**
   * nanoGPT's `get_batch`: `batchSize` offsets `ix = randint(len(data) - blockSize, (batchSize,))`
   * from dtrain's generator (repeatable under `manualSeed`; the same numbers as `randint` draws),
   * then x = data[i : i + T] and y = data[i + 1 : i + 1 + T] for each, as i32 [B, T].
   *
   * @param batchSize B.
   * @param blockSize T, the context length.
   * @param options The device.
   * @returns `[x, y]`.
   * @throws RangeError when the file holds fewer than blockSize + 1 tokens.
   */
  getBatch(
    batchSize: number,
    blockSize: number,
    options: TokenBatchOptions = {},
  ): [Tensor, Tensor] {
    checkPositive("getBatch", "batchSize", batchSize);
    this.#checkBlock("getBatch", blockSize);
    const offsets = randintNumbers(0, this.length - blockSize, batchSize);
    return windowBatch(this.tokens, offsets, blockSize, options.device ?? "cpu");
  }

  /**
   * The batch of `getBatch` at given offsets: x[b] = data[offsets[b] : offsets[b] + T], y the same
   * one token later.
   *
   * @param offsets The first token of each row, each at most `length - blockSize - 1`.
   * @param blockSize T.
   * @param options The device.
   * @returns `[x, y]`, i32 [offsets.length, T].
   */
  batchAt(
    offsets: readonly number[],
    blockSize: number,
    options: TokenBatchOptions = {},
  ): [Tensor, Tensor] {
    this.#checkBlock("batchAt", blockSize);
    if (offsets.length === 0) throw new RangeError("batchAt: no offsets given");
    offsets.forEach((o, b) => {
      if (!Number.isSafeInteger(o) || o < 0 || o + blockSize + 1 > this.length) {
        throw new RangeError(
          `batchAt: offset ${o} (row ${b}) is not in [0, ${this.length - blockSize - 1}] ` +
            `(the file holds ${this.length} tokens; a row reads blockSize + 1 = ${blockSize + 1})`,
        );
      }
    });
    return windowBatch(this.tokens, offsets, blockSize, options.device ?? "cpu");
  }

  /** All the tokens as a u16 tensor [length] (a copy, on `device`; convert with `.to("i32")`). */
  toTensor(device: Device = "cpu"): Tensor {
    return tensor(this.tokens, [this.length], { dtype: "u16", device });
  }

  #checkBlock(op: string, blockSize: number): void {
    checkPositive(op, "blockSize", blockSize);
    if (this.length < blockSize + 1) {
      throw new RangeError(
        `${op}: ${this.path} holds ${this.length} tokens, fewer than blockSize + 1 = ${
          blockSize + 1
        }`,
      );
    }
  }
}
