/**
 * Tokenizers for language-model corpora, as nanoGPT's `prepare.py` scripts make them: GPT-2's BPE
 * (`gpt2Tokenizer`, in tokenizer_gpt2.ts) and a character table (`charTokenizer`, as
 * `shakespeare_char`), with the `meta.json` that `deno task prepare` writes beside its `.bin`
 * files and that rebuilds the tokenizer (`fromMeta`, `loadMeta`), so that samples decode.
 * @module
 */

import { readFileSync } from "node:fs";
import { join } from "node:path";
import { z } from "zod";
import { gpt2Tokenizer } from "./tokenizer_gpt2.ts";

/** A text tokenizer: text to token ids and back. */
export interface Tokenizer {
  /** Which tokenizer: `"gpt2"` or `"char"` (the `tokenizer` field of `meta.json`). */
  readonly name: string;
  /** The number of token ids: every id is in `[0, vocabSize)`. */
  readonly vocabSize: number;
  /** Encodes `text` as token ids. */
  encode(text: string): number[] | Int32Array;
  /** Decodes token ids to text; throws a `RangeError` for an id outside the vocabulary. */
  decode(ids: ArrayLike<number>): string;
  /** What `meta.json` records to rebuild this tokenizer with {@linkcode fromMeta}. */
  toMeta(): TokenizerMeta;
}

/** What rebuilds the GPT-2 tokenizer. */
export interface Gpt2Meta {
  /** `"gpt2"`. */
  tokenizer: "gpt2";
  /** 50257. */
  vocabSize: 50257;
  /** The id of `<|endoftext|>`, 50256. */
  eot: 50256;
}

/** What rebuilds a character tokenizer: nanoGPT's `meta.pkl` fields. */
export interface CharMeta {
  /** `"char"`. */
  tokenizer: "char";
  /** The number of characters. */
  vocabSize: number;
  /** The character of each id. */
  itos: string[];
  /** The id of each character (the inverse of `itos`). */
  stoi: Record<string, number>;
}

/** What rebuilds a tokenizer, as `meta.json` holds it (see {@linkcode fromMeta}). */
export type TokenizerMeta = Gpt2Meta | CharMeta;

const TokenizerMetaSchema: z.ZodType<TokenizerMeta> = z.discriminatedUnion("tokenizer", [
  z.object({ tokenizer: z.literal("gpt2"), vocabSize: z.literal(50257), eot: z.literal(50256) }),
  z.object({
    tokenizer: z.literal("char"),
    vocabSize: z.number().int().positive(),
    itos: z.array(z.string()),
    stoi: z.record(z.string(), z.number().int().nonnegative()),
  }),
]);

/** The character tokenizer: {@linkcode Tokenizer} with its table. */
export interface CharTokenizer extends Tokenizer {
  /** `"char"`. */
  readonly name: "char";
  /** The characters (Unicode code points) by id, in code-point order. */
  readonly itos: readonly string[];
  /** The id of each character. */
  readonly stoi: ReadonlyMap<string, number>;
}

/**
 * A character-level tokenizer over the characters of `text`, as nanoGPT's
 * `data/shakespeare_char/prepare.py`: `chars = sorted(list(set(data)))`, id `i` for `chars[i]`.
 * Characters are Unicode code points (as Python's `str`), sorted by code point.
 *
 * @param text The corpus whose characters form the vocabulary.
 * @returns The tokenizer; its `encode` throws for a character not in `text`.
 *
 * @example The vocabulary of a word
 * ```ts
 * import assert from "node:assert/strict";
 * import { charTokenizer } from "./mod.ts";
 * const tok = charTokenizer("hello");
 * assert.deepEqual(tok.itos, ["e", "h", "l", "o"]);
 * assert.deepEqual(tok.encode("hell"), [1, 0, 2, 2]);
 * assert.equal(tok.decode([3, 2, 0]), "ole");
 * ```
 */
export function charTokenizer(text: string): CharTokenizer {
  const chars = [...new Set(text)].sort((a, b) => a.codePointAt(0)! - b.codePointAt(0)!);
  return tableTokenizer(chars);
}

function tableTokenizer(itos: string[]): CharTokenizer {
  const stoi = new Map(itos.map((c, i) => [c, i]));
  const vocabSize = itos.length;
  return {
    name: "char",
    vocabSize,
    itos,
    stoi,
    encode(text) {
      const ids: number[] = [];
      for (const c of text) {
        const id = stoi.get(c);
        if (id === undefined) {
          const code = c.codePointAt(0)!.toString(16).toUpperCase().padStart(4, "0");
          throw new RangeError(
            `char tokenizer: character ${JSON.stringify(c)} (U+${code}) at position ${ids.length}` +
              ` is not in the vocabulary of ${vocabSize} characters`,
          );
        }
        ids.push(id);
      }
      return ids;
    },
    decode(ids) {
      let text = "";
      for (let i = 0; i < ids.length; i++) {
        const c = itos[ids[i]];
        if (c === undefined) {
          throw new RangeError(
            `char tokenizer: id ${
              ids[i]
            } at position ${i} is outside the vocabulary [0, ${vocabSize})`,
          );
        }
        text += c;
      }
      return text;
    },
    toMeta: () => ({
      tokenizer: "char",
      vocabSize,
      itos: [...itos],
      stoi: Object.fromEntries(stoi),
    }),
  };
}

/**
 * Checks that `meta` (the contents of a `meta.json`, or `tokenizer.toMeta()`) describes a
 * tokenizer, without building it (synchronous: the train job reads the vocabulary size before it
 * starts any process); fields beyond the tokenizer's (token counts) are ignored.
 *
 * @param meta The parsed `meta.json`.
 * @returns The tokenizer's metadata.
 * @throws TypeError naming the field when `meta` is not a tokenizer's metadata, or when a
 *   character table is inconsistent (not one character per id, `stoi` not the inverse of `itos`).
 */
export function checkMeta(meta: unknown): TokenizerMeta {
  const parsed = TokenizerMetaSchema.safeParse(meta);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const field = issue.path.length ? issue.path.join(".") : "meta";
    throw new TypeError(`tokenizer meta: ${field}: ${issue.message}`);
  }
  const m = parsed.data;
  if (m.tokenizer === "gpt2") return m;
  if (m.itos.length !== m.vocabSize) {
    throw new TypeError(
      `tokenizer meta: itos has ${m.itos.length} characters, vocabSize is ${m.vocabSize}`,
    );
  }
  m.itos.forEach((c, id) => {
    if ([...c].length !== 1) {
      throw new TypeError(`tokenizer meta: itos.${id} is ${JSON.stringify(c)}, not one character`);
    }
    if (m.stoi[c] !== id) {
      throw new TypeError(
        `tokenizer meta: stoi[${JSON.stringify(c)}] is ${m.stoi[c]}, itos gives it id ${id}`,
      );
    }
  });
  if (Object.keys(m.stoi).length !== m.vocabSize || new Set(m.itos).size !== m.vocabSize) {
    throw new TypeError(
      `tokenizer meta: stoi has ${Object.keys(m.stoi).length} entries and itos` +
        ` ${new Set(m.itos).size} distinct characters, vocabSize is ${m.vocabSize}`,
    );
  }
  return m;
}

/**
 * Rebuilds the tokenizer that `meta` (a `meta.json`'s contents) describes. GPT-2's imports its
 * rank table on first use, so this is asynchronous.
 *
 * @param meta What `toMeta` returned, or `meta.json` parsed.
 * @returns The tokenizer.
 * @throws TypeError as {@linkcode checkMeta} does.
 * @example A character table round-trips through its metadata
 * ```ts
 * import assert from "node:assert/strict";
 * import { charTokenizer, fromMeta } from "./mod.ts";
 * const meta = JSON.parse(JSON.stringify(charTokenizer("to be or not").toMeta()));
 * assert.equal((await fromMeta(meta)).decode([6, 4]), "to");
 * ```
 */
export async function fromMeta(meta: unknown): Promise<Tokenizer> {
  const m = checkMeta(meta);
  return m.tokenizer === "gpt2" ? await gpt2Tokenizer() : tableTokenizer(m.itos);
}

/**
 * Reads and checks `meta.json` from a folder that `deno task prepare` wrote (synchronous; see
 * {@linkcode checkMeta}).
 *
 * @param dir The folder with `meta.json` (beside `train.bin` and `val.bin`).
 * @returns The tokenizer's metadata.
 * @throws Error naming the file when it is missing, not JSON, or not a tokenizer's metadata.
 */
export function readMeta(dir: string): TokenizerMeta {
  const path = join(dir, "meta.json");
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    throw new Error(`cannot read ${path}: ${(error as Error).message}`, { cause: error });
  }
  let meta: unknown;
  try {
    meta = JSON.parse(text);
  } catch (error) {
    throw new Error(`${path} is not JSON: ${(error as Error).message}`, { cause: error });
  }
  try {
    return checkMeta(meta);
  } catch (error) {
    throw new TypeError(`${path}: ${(error as Error).message}`, { cause: error });
  }
}

/**
 * Reads `meta.json` from a folder that `deno task prepare` wrote, and rebuilds its tokenizer
 * (to decode a model's samples into text).
 *
 * @param dir The folder with `meta.json` (beside `train.bin` and `val.bin`).
 * @returns The tokenizer.
 * @throws Error naming the file, as {@linkcode readMeta} does.
 */
export async function loadMeta(dir: string): Promise<Tokenizer> {
  return await fromMeta(readMeta(dir));
}
