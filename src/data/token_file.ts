/**
 * nanoGPT's token files (`train.bin`, `val.bin`, written by `data/<name>/prepare.py`): uint16
 * little-endian token ids with no header, memory-mapped as nanoGPT's `np.memmap` maps them (a
 * file larger than memory costs only the pages its batches touch), and served as nanoGPT's
 * `get_batch` serves them.
 * @module
 */

import { resolve } from "node:path";
import { MappedFile } from "../io/mapped_file.ts";
import { notRegularFile } from "../io/regular_file.ts";
import { tensor } from "../tensor/creation.ts";
import { randintNumbers } from "../tensor/random.ts";
import type { Device } from "../tensor/storage.ts";
import type { Tensor } from "../tensor/tensor.ts";
import { checkPositive, windowBatch } from "./_token_batch.ts";

/** Options of {@linkcode TokenFile.open}. */
export interface TokenFileOptions {
  /** The vocabulary's size: a batch holding a token at or above it is refused, naming it. */
  vocabSize?: number;
}

/** Options of {@linkcode TokenFile.getBatch} and {@linkcode TokenFile.batchAt}. */
export interface TokenBatchOptions {
  /** Where `x` and `y` go ("cpu" unless said otherwise). */
  device?: Device;
}

/**
 * An Error naming the file that could not be read by its absolute path (a relative one says
 * little in a launched worker's log), and why (a missing file says so).
 */
export function unreadable(path: string, error: unknown): Error {
  const reason = error instanceof Deno.errors.NotFound ? "no such file" : String(error);
  return new Error(`${resolve(path)}: cannot read it (${reason})`, { cause: error });
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
 * Maps `path` read-only, as an Error naming its absolute path when it cannot be.
 *
 * @param path A token file or shard (checked to be a regular file first).
 * @param access The read-ahead hint: `random` for scattered windows, `sequential` for a stream.
 * @returns The mapping, released by its `dispose`.
 */
export function mapTokenFile(path: string, access: "random" | "sequential"): MappedFile {
  checkTokenFile(path);
  try {
    return MappedFile.open(path, access);
  } catch (error) {
    throw unreadable(path, error);
  }
}

/**
 * The tokens of one nanoGPT `.bin` file, mapped into memory, not read: pages are read as batches
 * touch them, so a file larger than memory serves batches with the process's memory growing only
 * by their rows. `dispose()` (or `using`) releases the mapping; reading after it throws.
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
 * tokens.dispose();
 * Deno.removeSync(path);
 * ```
 */
export class TokenFile implements Disposable {
  /** The file mapped. */
  readonly path: string;
  readonly #file: MappedFile;
  readonly #vocabSize: number | undefined;
  #tokens: Uint16Array | null = null;

  private constructor(path: string, file: MappedFile, vocabSize: number | undefined) {
    this.path = path;
    this.#file = file;
    this.#vocabSize = vocabSize;
  }

  /**
   * Maps a nanoGPT token file (uint16 little-endian, no header).
   *
   * @param path The `.bin` file.
   * @param options `vocabSize`: every batch checks that its tokens are below it (meta.json's
   * vocabulary), naming the file and the token's position; a check of the whole file up front
   * would read every page of a file that may be larger than memory.
   * @returns Its tokens.
   * @throws Error naming the file when it cannot be mapped or has an odd byte length.
   */
  static open(path: string, options: TokenFileOptions = {}): Promise<TokenFile> {
    try {
      return Promise.resolve(TokenFile.openSync(path, options));
    } catch (error) {
      return Promise.reject(error);
    }
  }

  /** {@linkcode TokenFile.open} without the wait (mapping a file does not read it). */
  static openSync(path: string, options: TokenFileOptions = {}): TokenFile {
    const { vocabSize } = options;
    if (vocabSize !== undefined) checkPositive("TokenFile.open", "vocabSize", vocabSize);
    const file = mapTokenFile(path, "random");
    if (file.byteLength % 2 !== 0) {
      file.dispose();
      throw new RangeError(
        `${resolve(path)}: ${file.byteLength} bytes is not a whole number of uint16 tokens ` +
          "(a nanoGPT .bin file holds 2 bytes per token)",
      );
    }
    return new TokenFile(path, file, vocabSize);
  }

  /** The number of tokens (`len(data)` in nanoGPT); still answered after `dispose`. */
  get length(): number {
    return this.#file.byteLength / 2;
  }

  /**
   * The token ids, a view of the mapped pages (no copy), made on first use. Detached (length 0)
   * by `dispose`. Batches do not use it: V8 counts a view of a large file against its heap and
   * collects more often while one is alive.
   *
   * @throws Error once disposed.
   */
  get tokens(): Uint16Array {
    this.#checkLive("tokens");
    this.#tokens ??= new Uint16Array(this.#file.buffer());
    return this.#tokens;
  }

  /** Whether {@linkcode TokenFile.dispose} has released the mapping. */
  get disposed(): boolean {
    return this.#file.disposed;
  }

  /** Releases the mapping (views of `tokens` become empty); idempotent. */
  dispose(): void {
    this.#tokens = null;
    this.#file.dispose();
  }

  /** `using tokens = TokenFile.openSync(...)` releases the mapping at the end of the block. */
  [Symbol.dispose](): void {
    this.dispose();
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
    this.#checkLive("getBatch");
    checkPositive("getBatch", "batchSize", batchSize);
    this.#checkBlock("getBatch", blockSize);
    const offsets = randintNumbers(0, this.length - blockSize, batchSize);
    return windowBatch(this.#read, offsets, blockSize, options.device ?? "cpu");
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
    this.#checkLive("batchAt");
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
    return windowBatch(this.#read, offsets, blockSize, options.device ?? "cpu");
  }

  /** All the tokens as a u16 tensor [length] (a copy, on `device`; convert with `.to("i32")`). */
  toTensor(device: Device = "cpu"): Tensor {
    return tensor(this.tokens, [this.length], { dtype: "u16", device });
  }

  /** Copies tokens out of the mapping: only the pages of the rows asked for are read. */
  readonly #read = (start: number, into: Uint16Array<ArrayBuffer>): void => {
    this.#file.copyInto(into, 2 * start);
    const vocabSize = this.#vocabSize;
    if (vocabSize === undefined || vocabSize > 0xffff) return;
    const at = into.findIndex((t) => t >= vocabSize);
    if (at >= 0) {
      throw new RangeError(
        `${resolve(this.path)}: token ${into[at]} at position ${start + at} is outside the ` +
          `vocabulary of ${vocabSize} (meta.json)`,
      );
    }
  };

  #checkLive(op: string): void {
    if (this.disposed) {
      throw new Error(
        `${op}: ${this.path} was unmapped by dispose(); open it again to read its tokens`,
      );
    }
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
