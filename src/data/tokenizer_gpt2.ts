/**
 * GPT-2's byte-level BPE, with the token ids of tiktoken's `gpt2` encoding (what nanoGPT's
 * `prepare.py` scripts and `sample.py` use), from the `js-tiktoken` npm package.
 * @module
 */

import { gpt2Encoder } from "./_gpt2_bpe.ts";
import type { Tokenizer, TokenizerMeta } from "./tokenizer.ts";

/** GPT-2's end-of-text token, `<|endoftext|>`. */
const EOT_TEXT = "<|endoftext|>";

/** The GPT-2 tokenizer: {@linkcode Tokenizer} plus tiktoken's end-of-text handling. */
export interface Gpt2Tokenizer extends Tokenizer {
  /** `"gpt2"`. */
  readonly name: "gpt2";
  /** 50257: 50000 merges, 256 bytes and `<|endoftext|>`. */
  readonly vocabSize: 50257;
  /** The id of `<|endoftext|>`: 50256, which nanoGPT's openwebtext prepare appends to each document. */
  readonly eot: 50256;
  /**
   * Encodes `text` as tiktoken's `encode_ordinary`: `<|endoftext|>` in the text is plain text
   * (what nanoGPT's `prepare.py` scripts use for corpora).
   */
  encodeOrdinary(text: string): number[];
}

let cached: Gpt2Tokenizer | undefined;

/**
 * Returns GPT-2's tokenizer, with the ids of tiktoken's `gpt2` encoding. `encode` reads
 * `<|endoftext|>` in the text as the special token 50256 (as nanoGPT's `sample.py`:
 * `enc.encode(s, allowed_special={"<|endoftext|>"})`); `encodeOrdinary` reads it as text. The
 * rank table is built once (about 50k entries) and shared by every call. It is imported on the
 * first call, not with dtrain (545 KB that every process importing mod.ts would otherwise parse
 * and fetch), so the call is asynchronous. Encoding caches the ids of each distinct piece of text
 * (see src/data/bpe.ts; the pattern, with its note on `\s`, is in src/data/_gpt2_bpe.ts).
 *
 * @returns The tokenizer.
 *
 * @example The example of tiktoken's own tests
 * ```ts
 * import assert from "node:assert/strict";
 * import { gpt2Tokenizer } from "./mod.ts";
 * const enc = await gpt2Tokenizer();
 * assert.deepEqual(enc.encode("hello world"), [31373, 995]);
 * assert.deepEqual(enc.encode("hello <|endoftext|>"), [31373, 220, 50256]);
 * assert.equal(enc.decode([31373, 995]), "hello world");
 * ```
 */
export async function gpt2Tokenizer(): Promise<Gpt2Tokenizer> {
  if (cached !== undefined) return cached;
  const bpe = await gpt2Encoder();
  if (cached !== undefined) return cached;
  const vocabSize = 50257, eot = 50256;
  const special = new Map([[EOT_TEXT, eot]]);
  // Python's bytes.decode (tiktoken's decode) keeps a leading byte-order mark as U+FEFF; the
  // WHATWG decoder drops it unless told not to.
  const utf8 = new TextDecoder("utf-8", { ignoreBOM: true });
  cached = {
    name: "gpt2",
    vocabSize,
    eot,
    encode: (text) => Array.from(bpe.encodeWithSpecial(text, special)),
    encodeOrdinary: (text) => Array.from(bpe.encodeOrdinary(text)),
    decode(ids) {
      for (let i = 0; i < ids.length; i++) {
        const id = ids[i];
        if (!Number.isInteger(id) || id < 0 || id >= vocabSize) {
          throw new RangeError(
            `gpt2 tokenizer: id ${id} at position ${i} is outside the vocabulary [0, ${vocabSize})`,
          );
        }
      }
      return utf8.decode(bpe.decodeBytes(ids));
    },
    toMeta: (): TokenizerMeta => ({ tokenizer: "gpt2", vocabSize, eot }),
  };
  return cached;
}
