/**
 * llm.c's token shards (`dev/data/data_common.py`'s `write_datafile`, read by
 * `llmc/dataloader.h`): a header of 256 little-endian int32 (magic 20240520, version 1, the token
 * count), then the uint16 tokens. {@linkcode DistributedDataLoader} serves them as llm.c does.
 * @module
 */

import { basename, dirname, join, resolve } from "node:path";
import type { MappedFile } from "../io/mapped_file.ts";
import type { Device } from "../tensor/storage.ts";
import type { Tensor } from "../tensor/tensor.ts";
import { checkPositive, contiguousBatch } from "./_token_batch.ts";
import { checkTokenFile, mapTokenFile, unreadable } from "./token_file.ts";

/** The first int32 of an llm.c GPT-2 token shard. */
export const SHARD_MAGIC = 20240520;
/** The shard format version this reader takes. */
export const SHARD_VERSION = 1;
/** Bytes before the tokens: 256 int32. */
export const SHARD_HEADER_BYTES = 1024;

/**
 * Reads and checks a shard's header against its size.
 *
 * @param path The shard.
 * @returns The token count of the header.
 * @throws Error naming the file and what is wrong: a short file, a bad magic, version or count.
 */
export function readShardHeader(path: string): number {
  checkTokenFile(path);
  let file: Deno.FsFile;
  try {
    file = Deno.openSync(path);
  } catch (error) {
    throw unreadable(path, error);
  }
  try {
    const size = file.statSync().size;
    if (size < SHARD_HEADER_BYTES) {
      throw new Error(`${path}: ${size} bytes, shorter than the ${SHARD_HEADER_BYTES}-byte header`);
    }
    const header = new Uint8Array(SHARD_HEADER_BYTES);
    readAt(file, 0, header);
    const view = new DataView(header.buffer);
    const magic = view.getInt32(0, true), version = view.getInt32(4, true);
    const count = view.getInt32(8, true);
    if (magic !== SHARD_MAGIC) {
      throw new Error(
        `${path}: bad magic ${magic}, expected ${SHARD_MAGIC} (not an llm.c token shard; ` +
          "a headerless nanoGPT .bin file reads with TokenFile)",
      );
    }
    if (version !== SHARD_VERSION) {
      throw new Error(`${path}: unsupported version ${version}, expected ${SHARD_VERSION}`);
    }
    if (count <= 0) {
      throw new Error(
        `${path}: the header counts ${count} tokens; a shard holds at least one (llm.c's ` +
          "write_datafile writes the number of tokens after the header)",
      );
    }
    if (count * 2 + SHARD_HEADER_BYTES !== size) {
      throw new Error(
        `${path}: the header counts ${count} tokens, which need ${
          count * 2 + SHARD_HEADER_BYTES
        } bytes, but the file has ${size}`,
      );
    }
    return count;
  } finally {
    file.close();
  }
}

/** Fills `into` from byte `at` of `file` (readSync may return less than asked). */
function readAt(file: Deno.FsFile, at: number, into: Uint8Array): void {
  file.seekSync(at, Deno.SeekMode.Start);
  for (let done = 0; done < into.length;) {
    const n = file.readSync(into.subarray(done));
    if (n === null) throw new Error(`unexpected end of file at byte ${at + done}`);
    done += n;
  }
}

/** The files matching `pattern`, sorted: `*` and `?` in the last path component only. */
export function globFiles(pattern: string): string[] {
  const dir = dirname(pattern), name = basename(pattern);
  if (/[*?[]/.test(dir)) {
    throw new Error(
      `DistributedDataLoader: ${pattern}: wildcards are supported in file names only`,
    );
  }
  if (!/[*?]/.test(name)) return [pattern];
  const escaped = name.replace(/[.+^${}()|[\]\\]/g, "\\$&");
  const re = new RegExp(`^${escaped.replaceAll("*", ".*").replaceAll("?", ".")}$`);
  let entries: Deno.DirEntry[];
  try {
    entries = [...Deno.readDirSync(dir)];
  } catch (error) {
    throw unreadable(dir, error);
  }
  return entries.filter((e) => e.isFile && re.test(e.name)).map((e) => join(dir, e.name)).sort();
}

/** Options of {@linkcode DistributedDataLoader}. */
export interface DistributedDataLoaderOptions {
  /** Where `x` and `y` go ("cpu" unless said otherwise). */
  device?: Device;
}

/**
 * llm.c's `DistributedDataLoader` (train_gpt2.py, `llmc/dataloader.h` without shuffling): the
 * shards in sorted order, each read sequentially; batch k of a shard gives rank r the B * T + 1
 * tokens at `B*T*r + k*B*T*numProcesses`, as `[x, y]` i32 [B, T], and a shard ends when its
 * next batch would not fit for every rank (all ranks move on together). After the last shard
 * it starts over from the first. The current shard is memory-mapped: each step reads only its
 * batch's pages, and `close()` (or `using`) releases the mapping.
 *
 * @example Two ranks share one shard
 * ```ts
 * import assert from "node:assert/strict";
 * import { data } from "../../mod.ts";
 * const path = Deno.makeTempFileSync({ suffix: ".bin" });
 * const header = new Int32Array(256);
 * header.set([20240520, 1, 9]);
 * const tokens = new Uint16Array([0, 1, 2, 3, 4, 5, 6, 7, 8]);
 * Deno.writeFileSync(path, new Uint8Array([...new Uint8Array(header.buffer), ...new Uint8Array(tokens.buffer)]));
 * using loader = new data.DistributedDataLoader(path, 2, 2, 1, 2);
 * const [x, y] = loader.nextBatch();
 * assert.deepStrictEqual(x.tolist(), [[4, 5], [6, 7]]);
 * assert.deepStrictEqual(y.tolist(), [[5, 6], [7, 8]]);
 * Deno.removeSync(path);
 * ```
 */
export class DistributedDataLoader implements Disposable {
  /** The shards, sorted. */
  readonly files: readonly string[];
  /** The tokens of every shard together. */
  readonly numTokens: number;
  readonly #counts: number[];
  readonly #b: number;
  readonly #t: number;
  readonly #rank: number;
  readonly #world: number;
  readonly #device: Device;
  readonly #buffer: Uint16Array<ArrayBuffer>;
  #file: MappedFile | null = null;
  #shard = 0;
  #sample = 0;

  /**
   * Checks every shard's header (llm.c does too), then opens the first.
   *
   * @param files A pattern (`dir/fineweb_train_*.bin`) or a list of shard paths.
   * @param batchSize B.
   * @param blockSize T.
   * @param processRank This process's rank, in [0, numProcesses).
   * @param numProcesses The number of ranks reading the shards.
   * @param options The device.
   * @throws Error naming the file for a bad shard, one too small for a batch of every rank, or
   *   a pattern that matches nothing.
   */
  constructor(
    files: string | readonly string[],
    batchSize: number,
    blockSize: number,
    processRank = 0,
    numProcesses = 1,
    options: DistributedDataLoaderOptions = {},
  ) {
    const op = "DistributedDataLoader";
    checkPositive(op, "batchSize", batchSize);
    checkPositive(op, "blockSize", blockSize);
    checkPositive(op, "numProcesses", numProcesses);
    if (!Number.isSafeInteger(processRank) || processRank < 0 || processRank >= numProcesses) {
      throw new RangeError(`${op}: processRank ${processRank} is not in [0, ${numProcesses})`);
    }
    const list = typeof files === "string" ? globFiles(files) : [...files].sort();
    if (list.length === 0) throw new Error(`${op}: no files match ${files}`);
    const needed = numProcesses * batchSize * blockSize + 1;
    this.#counts = list.map((path) => {
      const count = readShardHeader(path);
      if (count < needed) {
        throw new Error(
          `${path}: ${count} tokens, fewer than one batch of every rank needs ` +
            `(numProcesses * B * T + 1 = ${needed})`,
        );
      }
      return count;
    });
    this.files = list;
    this.numTokens = this.#counts.reduce((a, b) => a + b, 0);
    [this.#b, this.#t, this.#rank, this.#world] = [batchSize, blockSize, processRank, numProcesses];
    this.#device = options.device ?? "cpu";
    this.#buffer = new Uint16Array(batchSize * blockSize + 1);
    this.reset();
  }

  /** The shard the next batch comes from (an index into `files`). */
  get currentShard(): number {
    return this.#shard;
  }

  /** Back to the first batch of the first shard. */
  reset(): void {
    this.#open(0);
  }

  /**
   * The next batch of this rank, moving to the next shard (or back to the first) when the current
   * one has no whole batch left for every rank.
   *
   * @returns `[x, y]`: i32 [B, T], y the tokens one after x's.
   * @throws Error once closed (until `reset()`).
   */
  nextBatch(): [Tensor, Tensor] {
    // Checked first: at a shard's end the loader would otherwise map the next one and go on.
    if (this.#file === null) {
      throw new Error("nextBatch: the DistributedDataLoader is closed; reset() reopens it");
    }
    const stride = this.#b * this.#t * this.#world;
    // llm.c's shard_num_samples: batches whose B*T+1 tokens fit for the last rank too.
    if (this.#sample >= Math.floor((this.#counts[this.#shard] - 1) / stride)) {
      this.#open((this.#shard + 1) % this.files.length);
    }
    const position = this.#sample * stride + this.#rank * this.#b * this.#t;
    this.#file!.copyInto(this.#buffer, SHARD_HEADER_BYTES + 2 * position);
    this.#sample++;
    return contiguousBatch(this.#buffer, this.#b, this.#t, this.#device);
  }

  /** Releases the open shard's mapping; idempotent (`reset()` opens the first shard again). */
  close(): void {
    this.#file?.dispose();
    this.#file = null;
  }

  /** `using loader = ...` closes it at the end of the block. */
  [Symbol.dispose](): void {
    this.close();
  }

  #open(shard: number): void {
    this.close();
    const path = this.files[shard];
    const file = mapTokenFile(path, "sequential");
    // Checked against the header when the loader was made; a shard rewritten since then would
    // be read past its end.
    const expected = SHARD_HEADER_BYTES + 2 * this.#counts[shard];
    if (file.byteLength !== expected) {
      file.dispose();
      throw new Error(
        `${resolve(path)}: ${file.byteLength} bytes now, ${expected} when its header was checked ` +
          "(the shard changed while the loader was open)",
      );
    }
    this.#file = file;
    this.#shard = shard;
    this.#sample = 0;
  }
}
