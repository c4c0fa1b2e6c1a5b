/**
 * The data of `--dataset tokens`: nanoGPT's `train.bin` and `val.bin` (uint16 tokens, read once)
 * and `meta.json` (the vocabulary size and the tokenizer that decodes a sample: data.loadMeta),
 * with nanoGPT's `get_batch`: `batchSize` random offsets into a split, each a window of
 * `blockSize` tokens and the same window one token on as the targets.
 * @module
 */

import { existsSync } from "node:fs";
import { join } from "node:path";
import { rand, tensor } from "../tensor/creation.ts";
import type { Device } from "../tensor/storage.ts";
import type { Tensor } from "../tensor/tensor.ts";
import { loadMeta, type Tokenizer } from "../data/tokenizer.ts";
import { ConfigError } from "./_schema.ts";

/** nanoGPT's vocabulary when a data set has no meta (GPT-2's 50257, rounded up to 64s). */
export const GPT2_PADDED_VOCAB = 50304;

/** One split's tokens. */
export class TokenSplit {
  /**
   * @param path The .bin file, for messages.
   * @param tokens Its tokens.
   */
  constructor(readonly path: string, readonly tokens: Uint16Array) {}

  /**
   * nanoGPT's `get_batch(split)`: `ix = torch.randint(len(data) - block_size, (batch_size,))`
   * from the global generator, then `x` = data[i : i + T] and `y` = data[i + 1 : i + 1 + T] for each
   * offset, as i32 [B, T] on `device`.
   */
  getBatch(batchSize: number, blockSize: number, device: Device = "cpu"): [Tensor, Tensor] {
    const n = this.tokens.length - blockSize;
    // Two uniform draws per offset: one f32 alone has 24 bits, too few for a large file.
    using u = rand([2 * batchSize]);
    const draws = u.toArray() as Float32Array;
    const x = new Int32Array(batchSize * blockSize), y = new Int32Array(batchSize * blockSize);
    for (let b = 0; b < batchSize; b++) {
      const unit = draws[2 * b] + draws[2 * b + 1] / 2 ** 24;
      const i = Math.min(n - 1, Math.floor(unit * n));
      for (let t = 0; t < blockSize; t++) {
        x[b * blockSize + t] = this.tokens[i + t];
        y[b * blockSize + t] = this.tokens[i + t + 1];
      }
    }
    const shape = [batchSize, blockSize];
    return [tensor(x, shape, { dtype: "i32", device }), tensor(y, shape, { dtype: "i32", device })];
  }
}

/** What meta.json says: the vocabulary's size, and the tokenizer that decodes a sample. */
export interface TokenMeta {
  vocabSize: number;
  /** The data set's tokenizer (data.loadMeta), or null without a meta.json. */
  tokenizer: Tokenizer | null;
}

/**
 * Reads `dir/meta.json` as `deno task prepare` writes it (data.loadMeta). Without the file,
 * nanoGPT's GPT-2 vocabulary (padded to 50304) and no tokenizer.
 * @throws ConfigError naming the file when it is not a tokenizer's meta.
 */
export function readTokenMeta(dir: string): TokenMeta {
  if (!existsSync(join(dir, "meta.json"))) return { vocabSize: GPT2_PADDED_VOCAB, tokenizer: null };
  try {
    const tokenizer = loadMeta(dir);
    return { vocabSize: tokenizer.vocabSize, tokenizer };
  } catch (error) {
    throw new ConfigError("dataDir", (error as Error).message);
  }
}

/** A data set's splits and meta. */
export interface TokenData {
  train: TokenSplit;
  val: TokenSplit;
  meta: TokenMeta;
}

/**
 * Checks that `dir` holds both splits, each of at least `blockSize + 1` tokens, and a readable
 * meta.json, from the files' sizes (what the job checks before it starts any process).
 * @throws ConfigError ("dataDir") naming what is missing or too short.
 */
export function checkTokenData(dir: string, blockSize: number): void {
  if (!existsSync(dir)) throw missingDir(dir);
  readTokenMeta(dir);
  for (const name of ["train", "val"]) {
    const path = join(dir, `${name}.bin`);
    if (!existsSync(path)) throw missingSplit(dir, name);
    tooShort(path, Math.floor(Deno.statSync(path).size / 2), blockSize);
  }
}

function missingDir(dir: string): ConfigError {
  return new ConfigError(
    "dataDir",
    `${dir} does not exist (deno task prepare --out ${dir} writes train.bin, val.bin and ` +
      `meta.json)`,
  );
}

function missingSplit(dir: string, name: string): ConfigError {
  return new ConfigError(
    "dataDir",
    `no ${name}.bin in ${dir} (deno task prepare --out ${dir} writes train.bin, val.bin ` +
      `and meta.json)`,
  );
}

function tooShort(path: string, tokens: number, blockSize: number): void {
  if (tokens >= blockSize + 1) return;
  throw new ConfigError(
    "dataDir",
    `${path} holds ${tokens} tokens, fewer than blockSize + 1 = ${blockSize + 1} ` +
      `(a window and its next token): lower --block-size or use more data`,
  );
}

function readSplit(dir: string, name: string, blockSize: number, vocabSize: number): TokenSplit {
  const path = join(dir, `${name}.bin`);
  let bytes: Uint8Array;
  try {
    bytes = Deno.readFileSync(path);
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) throw missingSplit(dir, name);
    throw new ConfigError("dataDir", `cannot read ${path}: ${(error as Error).message}`);
  }
  if (bytes.byteLength % 2 !== 0) {
    throw new ConfigError("dataDir", `${path} has an odd number of bytes: not uint16 tokens`);
  }
  const tokens = new Uint16Array(bytes.buffer, bytes.byteOffset, bytes.byteLength / 2);
  tooShort(path, tokens.length, blockSize);
  const top = tokens.reduce((m, t) => Math.max(m, t), 0);
  if (top >= vocabSize) {
    throw new ConfigError(
      "dataDir",
      `${path} holds token ${top}, outside the vocabulary of ${vocabSize} (meta.json)`,
    );
  }
  return new TokenSplit(path, tokens);
}

/**
 * Opens `dir`'s splits and meta for windows of `blockSize` tokens.
 * @throws ConfigError ("dataDir") naming what is missing or does not fit.
 */
export function openTokenData(dir: string, blockSize: number): TokenData {
  if (!existsSync(dir)) throw missingDir(dir);
  const meta = readTokenMeta(dir);
  return {
    meta,
    train: readSplit(dir, "train", blockSize, meta.vocabSize),
    val: readSplit(dir, "val", blockSize, meta.vocabSize),
  };
}
