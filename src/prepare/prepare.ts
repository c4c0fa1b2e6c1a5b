/**
 * What `deno task prepare` does, as nanoGPT's `data/<name>/prepare.py` scripts: tokenize text
 * files, split them 90/10 into `train.bin` and `val.bin` (token ids as uint16, little-endian) and
 * write `meta.json`, from which `data.loadMeta` rebuilds the tokenizer.
 * @module
 */

import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";
import { charTokenizer, type TokenizerMeta } from "../data/tokenizer.ts";
import { type Gpt2Tokenizer, gpt2Tokenizer } from "../data/tokenizer_gpt2.ts";
import { notRegularFile } from "../io/regular_file.ts";
import { writeAll } from "../io/write_all.ts";
import { chunkEnd, codePointLength, codePointOffset } from "./_split.ts";
import { invalidUtf8At } from "./_utf8.ts";

/** The tokenizers prepare knows. */
export const TOKENIZERS = ["gpt2", "char"] as const;

/** What to do with bytes that are not UTF-8, as Python's `open(errors=...)`. */
export const DECODE_ERRORS = ["strict", "replace"] as const;

/** The files prepare writes into its output folder. */
export const OUTPUTS = ["train.bin", "val.bin", "meta.json"] as const;

/** The largest id a uint16 `.bin` file holds. */
const MAX_ID = 0xffff;

/** Text encoded per chunk, so that progress moves and the ids of one chunk stay small. */
const CHUNK = 1 << 20;

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
  /** Called as encoding advances, with the characters (UTF-16 units) done of `total`. */
  progress?: (done: number, total: number) => void;
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
 * is encoded as tiktoken's `encode_ordinary` (as nanoGPT's shakespeare prepare). Files are written
 * beside their final names and renamed when complete, so a failure leaves earlier ones intact.
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
  const texts = inputs.map((path) => readInput(path, errors));
  checkOutputs(out, force);

  const corpus = texts.join("");
  const tokenizer = name === "gpt2" ? await gpt2Tokenizer() : charTokenizer(corpus);
  if (tokenizer.vocabSize - 1 > MAX_ID) {
    throw new PrepareError(
      `--tokenizer ${name}: vocabulary of ${tokenizer.vocabSize} tokens has ids up to ` +
        `${tokenizer.vocabSize - 1}, more than uint16 holds (${MAX_ID})`,
    );
  }
  makeOutDir(out);
  const cut = codePointOffset(corpus, Math.floor(codePointLength(corpus) * (1 - valFraction)));
  const ends: number[] = [];
  for (const text of texts) ends.push((ends.at(-1) ?? 0) + text.length);
  const encode = name === "gpt2"
    ? (text: string) => (tokenizer as Gpt2Tokenizer).encodeOrdinary(text)
    : (text: string) => tokenizer.encode(text);
  const counter = { done: 0, total: corpus.length, progress: options.progress };
  const eotId = eot ? (tokenizer as Gpt2Tokenizer).eot : undefined;

  const pid = Deno.pid;
  const partial = (file: string) => join(out, `.${file}.partial-${pid}`);
  try {
    const trainTokens = writing(out, "train.bin", () =>
      writeBin(
        partial("train.bin"),
        corpus,
        0,
        cut,
        ends,
        encode,
        eotId,
        counter,
      ));
    const valTokens = writing(
      out,
      "val.bin",
      () => writeBin(partial("val.bin"), corpus, cut, corpus.length, ends, encode, eotId, counter),
    );
    const meta: PrepareMeta = { ...tokenizer.toMeta(), dtype: "uint16", trainTokens, valTokens };
    const json = new TextEncoder().encode(JSON.stringify(meta, null, 2) + "\n");
    writing(out, "meta.json", () => writeFile(partial("meta.json"), json));
    for (const file of OUTPUTS) {
      writing(out, file, () => renameSync(partial(file), join(out, file)));
    }
    return meta;
  } finally {
    for (const file of OUTPUTS) rmSync(partial(file), { force: true });
  }
}

/**
 * Runs `write`, one step of writing `file` into `out`; a failure (a full disk, say) becomes one
 * message naming the folder, the file and the reason, the earlier outputs left as they were.
 */
function writing<T>(out: string, file: string, write: () => T): T {
  try {
    return write();
  } catch (error) {
    if (error instanceof PrepareError) throw error;
    const full = (error as { code?: string }).code === "ENOSPC";
    throw new PrepareError(
      `--out ${out}: writing ${file} failed: ${(error as Error).message}; ` +
        (full ? "free space on that disk or choose another --out, " : "") +
        "and the outputs there were left as they were",
    );
  }
}

function readInput(path: string, errors: PrepareOptions["errors"]): string {
  let bytes: Uint8Array;
  try {
    const other = notRegularFile(path);
    if (other !== null) throw new PrepareError(`--input ${path}: is ${other}, not a regular file`);
    bytes = readFileSync(path);
  } catch (error) {
    if (error instanceof PrepareError) throw error;
    const missing = (error as { code?: string }).code === "ENOENT" ||
      error instanceof Deno.errors.NotFound;
    throw new PrepareError(
      `--input ${path}: ${
        missing ? "no such file" : `cannot read it: ${(error as Error).message}`
      }`,
    );
  }
  // Python's open() keeps a byte-order mark as U+FEFF, and so does this.
  const strict = errors === "strict";
  try {
    return new TextDecoder("utf-8", { fatal: strict, ignoreBOM: true }).decode(bytes);
  } catch {
    const at = invalidUtf8At(bytes);
    const seen = Array.from(bytes.subarray(at, at + 4), (b) => b.toString(16).padStart(2, "0"));
    throw new PrepareError(
      `--input ${path}: not UTF-8 at byte ${at} (0x${seen.join(" 0x")} ...), where nanoGPT's ` +
        "prepare.py raises UnicodeDecodeError; convert the file to UTF-8, or pass " +
        "--errors replace to read such bytes as U+FFFD",
    );
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

function writeFile(path: string, bytes: Uint8Array): void {
  let file;
  try {
    file = Deno.openSync(path, { write: true, create: true, truncate: true });
  } catch (error) {
    throw new PrepareError(`--out: cannot write ${path}: ${(error as Error).message}`);
  }
  try {
    writeAll(file, bytes);
  } finally {
    file.close();
  }
}

/**
 * Encodes `corpus[start, end)` into the uint16 file `path`, chunk by chunk, each input file's part
 * on its own (its end, with `eot`, followed by that id); returns the number of tokens.
 */
function writeBin(
  path: string,
  corpus: string,
  start: number,
  end: number,
  fileEnds: number[],
  encode: (text: string) => ArrayLike<number>,
  eot: number | undefined,
  counter: { done: number; total: number; progress?: (done: number, total: number) => void },
): number {
  let file;
  try {
    file = Deno.openSync(path, { write: true, create: true, truncate: true });
  } catch (error) {
    throw new PrepareError(`--out: cannot write ${path}: ${(error as Error).message}`);
  }
  let tokens = 0;
  try {
    let fileStart = 0;
    for (const fileEnd of fileEnds) {
      const from = Math.max(start, fileStart), to = Math.min(end, fileEnd);
      // A file's end-of-text goes with its last character.
      const ownsEot = eot !== undefined && fileEnd > fileStart && fileEnd > start && fileEnd <= end;
      fileStart = fileEnd;
      for (let pos = from; pos < to;) {
        const next = chunkEnd(corpus, pos, to, CHUNK);
        tokens += writeIds(file, encode(corpus.slice(pos, next)));
        counter.done += next - pos;
        counter.progress?.(counter.done, counter.total);
        pos = next;
      }
      if (ownsEot) tokens += writeIds(file, [eot!]);
    }
  } finally {
    file.close();
  }
  counter.progress?.(counter.done, counter.total);
  return tokens;
}

/** Writes ids as uint16 in the platform's order: every platform Deno runs on is little-endian. */
function writeIds(file: Deno.FsFile, ids: ArrayLike<number>): number {
  writeAll(file, new Uint8Array(Uint16Array.from(ids).buffer));
  return ids.length;
}
