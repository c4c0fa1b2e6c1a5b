/**
 * The data of `--dataset tokens`: nanoGPT's `train.bin` and `val.bin` (uint16 tokens, mapped)
 * (data.TokenFile, whose `getBatch` is nanoGPT's `get_batch`) and `meta.json` (the vocabulary
 * size and the tokenizer that decodes a sample: data.readMeta), checked for the job.
 * @module
 */

import { existsSync } from "node:fs";
import { join } from "node:path";
import { TokenFile } from "../data/token_file.ts";
import { readMeta, type TokenizerMeta } from "../data/tokenizer.ts";
import { ConfigError } from "./_schema.ts";

/** nanoGPT's vocabulary when a data set has no meta (GPT-2's 50257, rounded up to 64s). */
export const GPT2_PADDED_VOCAB = 50304;

/** What meta.json says: the vocabulary's size, and the tokenizer that decodes a sample. */
export interface TokenMeta {
  vocabSize: number;
  /** The data set's tokenizer, as meta.json describes it (data.readMeta); null without one. */
  tokenizer: TokenizerMeta | null;
}

/**
 * Reads `dir/meta.json` as `deno task prepare` writes it (data.loadMeta). Without the file,
 * nanoGPT's GPT-2 vocabulary (padded to 50304) and no tokenizer.
 * @throws ConfigError naming the file when it is not a tokenizer's meta.
 */
export function readTokenMeta(dir: string): TokenMeta {
  if (!existsSync(join(dir, "meta.json"))) return { vocabSize: GPT2_PADDED_VOCAB, tokenizer: null };
  try {
    const tokenizer = readMeta(dir);
    return { vocabSize: tokenizer.vocabSize, tokenizer };
  } catch (error) {
    throw new ConfigError("dataDir", (error as Error).message);
  }
}

/** A data set's splits and meta. */
export interface TokenData {
  train: TokenFile;
  val: TokenFile;
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

function readSplit(dir: string, name: string, blockSize: number, vocabSize: number): TokenFile {
  const path = join(dir, `${name}.bin`);
  if (!existsSync(path)) throw missingSplit(dir, name);
  let file: TokenFile;
  try {
    // Each batch checks its tokens against the vocabulary: a scan of the whole file here would
    // read every page of one that may be larger than memory (OpenWebText's is 18 GB).
    file = TokenFile.openSync(path, { vocabSize });
  } catch (error) {
    throw new ConfigError("dataDir", (error as Error).message);
  }
  tooShort(path, file.length, blockSize);
  return file;
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
