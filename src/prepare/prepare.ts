/**
 * What `deno task prepare` does, as nanoGPT's `data/<name>/prepare.py` scripts: tokenize text
 * files, split them 90/10 into `train.bin` and `val.bin` (token ids as uint16, little-endian) and
 * write `meta.json`, from which `data.loadMeta` rebuilds the tokenizer.
 * @module
 */

import { existsSync, mkdirSync, renameSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";
import { charTokenizer, type Tokenizer, type TokenizerMeta } from "../data/tokenizer.ts";
import { gpt2Encoder } from "../data/_gpt2_bpe.ts";
import { writeAll } from "../io/write_all.ts";
import { type Boundary, ChunkEncoder, TokenWriter, WriteError } from "./_encode.ts";
import { EncoderPool } from "./_pool.ts";
import { BLOCK_BYTES, InputError, readTextBlocks } from "./_read.ts";
import { codePointLength, codePointOffset, safeBoundary } from "./_split.ts";

/**
 * The encoding threads `--workers` defaults to: every core, up to 8. Each loads its own rank table
 * and piece cache (two workers peaked at 490 MB against one's 310 MB), which a 64-core machine
 * would multiply into gigabytes.
 */
export const DEFAULT_WORKERS = Math.max(1, Math.min(navigator.hardwareConcurrency ?? 1, 8));

/** The tokenizers prepare knows. */
export const TOKENIZERS = ["gpt2", "char"] as const;

/** What to do with bytes that are not UTF-8, as Python's `open(errors=...)`. */
export const DECODE_ERRORS = ["strict", "replace"] as const;

/** The files prepare writes into its output folder. */
export const OUTPUTS = ["train.bin", "val.bin", "meta.json"] as const;

/** The largest id a uint16 `.bin` file holds. */
const MAX_ID = 0xffff;

/**
 * The least text (UTF-16 units) of a chunk encoded at once: large enough that sending it to a
 * worker costs little next to encoding it, small enough that progress moves and memory stays low.
 */
export const CHUNK_CHARS = 1 << 18;

/** A wrong argument or an unusable input or output; the message names it. */
export class PrepareError extends Error {
  /** @param message What is wrong, naming the flag or file. */
  constructor(message: string) {
    super(message);
    this.name = "PrepareError";
  }
}

/** Options of {@linkcode prepare}. */
export interface PrepareOptions {
  /** `"gpt2"` (tiktoken's GPT-2 BPE) or `"char"` (the input's characters, as shakespeare_char). */
  tokenizer: string;
  /** The text files (UTF-8), read in order as one corpus. */
  inputs: string[];
  /** The output folder (created if missing). */
  out: string;
  /** The fraction of the corpus, from its end, that forms `val.bin` (default 0.1, as nanoGPT). */
  valFraction?: number;
  /** Overwrite `train.bin`, `val.bin` and `meta.json` if they exist (default false: refuse). */
  force?: boolean;
  /**
   * gpt2 only: append `<|endoftext|>` (50256) after each input file, as nanoGPT's openwebtext
   * prepare does after each document (default false, as its shakespeare prepare).
   */
  eot?: boolean;
  /**
   * Bytes of an input that are not UTF-8: `"strict"` (the default, as nanoGPT's prepare.py)
   * refuses the file naming the byte; `"replace"` reads each as U+FFFD.
   */
  errors?: (typeof DECODE_ERRORS)[number];
  /** Called as encoding advances, with the characters (code points) done of `total`. */
  progress?: (done: number, total: number) => void;
  /**
   * gpt2 only: the Web Workers that encode chunks in parallel (default: every core,
   * `navigator.hardwareConcurrency`); 1 encodes on the calling thread. The ids are the same for
   * every count.
   */
  workers?: number;
  /** The least chunk length (UTF-16 units) cut from the text (default {@linkcode CHUNK_CHARS}). */
  chunkChars?: number;
  /** The bytes read from an input at a time (default 1 MiB). */
  blockBytes?: number;
}

/** What {@linkcode prepare} wrote: the contents of `meta.json`. */
export type PrepareMeta = TokenizerMeta & {
  /** How the `.bin` files store ids. */
  dtype: "uint16";
  /** Tokens in `train.bin`. */
  trainTokens: number;
  /** Tokens in `val.bin`. */
  valTokens: number;
};

/**
 * Tokenizes `inputs` into `out/train.bin`, `out/val.bin` and `out/meta.json`. The corpus (the
 * inputs' texts, one after the other) splits at character `floor(n * (1 - valFraction))` of its
 * `n` characters (code points): nanoGPT's `data[:int(n*0.9)]`, so Tiny Shakespeare with `"char"`
 * gives its 65 characters, 1,003,854 train and 111,540 validation tokens. With `"gpt2"` each part
 * is encoded as tiktoken's `encode_ordinary` (as nanoGPT's shakespeare prepare). The inputs are
 * streamed twice (once to count and check them, once to encode), in blocks, so memory does not
 * grow with their size; the chunks encode on `workers` threads and are written in order. Files
 * are written beside their final names and renamed when complete, so a failure leaves earlier ones
 * intact.
 *
 * @param options See {@linkcode PrepareOptions}.
 * @returns The metadata written to `meta.json`.
 * @throws PrepareError for an unknown tokenizer, a missing input or one that is not a file or not
 *   UTF-8 (unless `errors: "replace"`), a vocabulary too large for uint16, an output folder that
 *   cannot be written (a full disk included), or outputs that exist without `force`.
 */
export async function prepare(options: PrepareOptions): Promise<PrepareMeta> {
  const { inputs, out, valFraction = 0.1, force = false, eot = false } = options;
  const errors = options.errors ?? "strict";
  const name = options.tokenizer;
  if (!(TOKENIZERS as readonly string[]).includes(name)) {
    throw new PrepareError(
      `--tokenizer: unknown tokenizer "${name}"; expected one of ${TOKENIZERS.join(", ")}`,
    );
  }
  if (eot && name !== "gpt2") {
    throw new PrepareError(`--eot: only the gpt2 tokenizer has an end-of-text token, not ${name}`);
  }
  if (!(valFraction >= 0 && valFraction < 1)) {
    throw new PrepareError(`--val-fraction: must be in [0, 1), got ${valFraction}`);
  }
  if (!(DECODE_ERRORS as readonly string[]).includes(errors)) {
    throw new PrepareError(
      `--errors: unknown handler ${JSON.stringify(errors)}; expected one of ${
        DECODE_ERRORS.join(", ")
      }`,
    );
  }
  if (inputs.length === 0) throw new PrepareError("--input: no input file given");
  const workers = options.workers ?? DEFAULT_WORKERS;
  if (!(Number.isInteger(workers) && workers >= 1)) {
    throw new PrepareError(`--workers: must be a whole number at least 1, got ${workers}`);
  }
  const chunkChars = options.chunkChars ?? CHUNK_CHARS;
  const blockBytes = options.blockBytes ?? BLOCK_BYTES;
  const blocks = (path: string) => inputError(() => readTextBlocks(path, errors, blockBytes));

  // The workers start (and load GPT-2's rank table) while this thread reads the inputs once.
  const pool = name === "gpt2" && workers > 1 ? new EncoderPool(workers) : undefined;
  const pid = Deno.pid;
  const partial = (file: string) => join(out, `.${file}.partial-${pid}`);
  let wrote = false;
  try {
    // The first pass counts the corpus's characters (where the validation part starts), finds
    // the character table, and refuses a bad input before any output is touched.
    let total = 0;
    const chars = name === "char" ? new Set<string>() : undefined;
    for (const path of inputs) {
      for (const block of blocks(path)) {
        total += codePointLength(block);
        if (chars !== undefined) { for (const char of block) chars.add(char); }
      }
    }
    checkOutputs(out, force);

    const table = chars === undefined ? undefined : charTokenizer([...chars].join(""));
    const tokenizerMeta = table?.toMeta() ?? GPT2_META;
    if (tokenizerMeta.vocabSize - 1 > MAX_ID) {
      throw new PrepareError(
        `--tokenizer ${name}: vocabulary of ${tokenizerMeta.vocabSize} tokens has ids up to ` +
          `${tokenizerMeta.vocabSize - 1}, more than uint16 holds (${MAX_ID})`,
      );
    }
    makeOutDir(out);
    wrote = true;
    const cut = Math.floor(total * (1 - valFraction));

    const train = writing(out, () => new TokenWriter("train.bin", partial("train.bin")));
    const val = writing(out, () => new TokenWriter("val.bin", partial("val.bin")));
    try {
      const encoder = await chunkEncoder(table, pool, chunkChars);
      // Each file's text, and the train and validation parts, are encoded on their own, with
      // a file's end-of-text after its last character, in the part that holds that character.
      let done = 0, part = train;
      for (const path of inputs) {
        const fileStart = done;
        for (const block of blocks(path)) {
          const length = codePointLength(block);
          if (part === train && done + length > cut) {
            const at = codePointOffset(block, cut - done);
            if (at > 0) await writing(out, () => encoder.add(block.slice(0, at), train));
            part = val;
            if (at < block.length) await writing(out, () => encoder.add(block.slice(at), val));
          } else await writing(out, () => encoder.add(block, part));
          done += length;
          options.progress?.(done, total);
        }
        if (eot && done > fileStart) {
          await writing(out, () => encoder.addIds(Uint16Array.of(EOT_ID), part));
        }
      }
      await writing(out, () => encoder.drain());
      options.progress?.(done, total);
    } finally {
      train.close();
      val.close();
    }
    const meta: PrepareMeta = {
      ...tokenizerMeta,
      dtype: "uint16",
      trainTokens: train.tokens,
      valTokens: val.tokens,
    };
    const json = new TextEncoder().encode(JSON.stringify(meta, null, 2) + "\n");
    writing(out, () => writeFile("meta.json", partial("meta.json"), json));
    for (const file of OUTPUTS) {
      writing(out, () => rename(file, partial(file), join(out, file)));
    }
    return meta;
  } finally {
    pool?.close();
    if (wrote) { for (const file of OUTPUTS) rmSync(partial(file), { force: true }); }
  }
}

/** GPT-2's end-of-text id, which `eot` appends after each file. */
const EOT_ID = 50256;

/** What `meta.json` records for GPT-2 (as `gpt2Tokenizer().toMeta()`, without loading it). */
const GPT2_META: TokenizerMeta = { tokenizer: "gpt2", vocabSize: 50257, eot: EOT_ID };

/**
 * The chunk encoder of `tokenizer`: GPT-2's on `pool`'s workers (or this thread), cut at safe
 * boundaries; a character table's on this thread, cut anywhere (a block never splits a character).
 */
async function chunkEncoder(
  table: Tokenizer | undefined,
  pool: EncoderPool | undefined,
  chunkChars: number,
): Promise<ChunkEncoder> {
  if (table !== undefined) {
    const tokenizer = table;
    const anywhere: Boundary = (text) => text.length;
    return new ChunkEncoder((text) => Uint16Array.from(tokenizer.encode(text)), anywhere, 1, 1);
  }
  if (pool !== undefined) {
    // Four chunks per worker: some always waiting, so no worker idles while the main thread
    // reads and writes; memory stays a few chunks whatever the input's size.
    return new ChunkEncoder((text) => pool.encode(text), safeBoundary, chunkChars, 4 * pool.size);
  }
  const bpe = await gpt2Encoder();
  return new ChunkEncoder((text) => bpe.encodeOrdinary(text), safeBoundary, chunkChars, 1);
}

/** Runs `read`, turning an unusable input into a PrepareError naming it. */
function* inputError(read: () => Generator<string>): Generator<string> {
  try {
    yield* read();
  } catch (error) {
    if (error instanceof InputError) throw new PrepareError(error.message);
    throw error;
  }
}

/**
 * Runs `write`, one step of writing into `out`; a failure (a full disk, say) becomes one message
 * naming the folder, the file and the reason, the earlier outputs left as they were.
 */
function writing<T>(out: string, write: () => T): T {
  const named = (error: unknown): never => {
    if (!(error instanceof WriteError)) throw error;
    const full = (error.cause as { code?: string }).code === "ENOSPC";
    throw new PrepareError(
      `--out ${out}: writing ${error.file} failed: ${error.message}; ` +
        (full ? "free space on that disk or choose another --out, " : "") +
        "and the outputs there were left as they were",
    );
  };
  try {
    const result = write();
    return (result instanceof Promise ? result.catch(named) : result) as T;
  } catch (error) {
    return named(error);
  }
}

function checkOutputs(out: string, force: boolean): void {
  if (existsSync(out) && !statSync(out).isDirectory()) {
    throw new PrepareError(`--out ${out}: exists and is not a folder`);
  }
  if (!force) {
    const present = OUTPUTS.filter((file) => existsSync(join(out, file)));
    if (present.length > 0) {
      throw new PrepareError(
        `--out ${out}: ${present.join(", ")} already there; pass --force to overwrite`,
      );
    }
  }
}

function makeOutDir(out: string): void {
  try {
    mkdirSync(out, { recursive: true });
  } catch (error) {
    throw new PrepareError(`--out ${out}: cannot create the folder: ${(error as Error).message}`);
  }
}

function writeFile(name: string, path: string, bytes: Uint8Array): void {
  let file: Deno.FsFile | undefined;
  try {
    file = Deno.openSync(path, { write: true, create: true, truncate: true });
    writeAll(file, bytes);
  } catch (error) {
    throw new WriteError(name, error as Error);
  } finally {
    file?.close();
  }
}

function rename(name: string, from: string, to: string): void {
  try {
    renameSync(from, to);
  } catch (error) {
    throw new WriteError(name, error as Error);
  }
}
