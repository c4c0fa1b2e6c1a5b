/**
 * GPT-2's byte-level BPE, with the token ids of tiktoken's `gpt2` encoding (what nanoGPT's
 * `prepare.py` scripts and `sample.py` use), from the `js-tiktoken` npm package.
 * @module
 */

import { Tiktoken } from "js-tiktoken/lite";
import gpt2Ranks from "js-tiktoken/ranks/gpt2";
import type { Tokenizer, TokenizerMeta } from "./tokenizer.ts";

/** GPT-2's end-of-text token, `<|endoftext|>`. */
const EOT_TEXT = "<|endoftext|>";

// [Note: tiktoken's whitespace] tiktoken splits text with Rust's regex, whose `\s` is Unicode's
// White_Space property; JavaScript's `\s` differs in two characters: it leaves out U+0085 (NEL)
// and adds U+FEFF (the byte-order mark). js-tiktoken ships GPT-2's pattern with JavaScript's `\s`,
// so " \u0085" or " \uFEFF" would split differently from tiktoken (and from Hugging Face's
// tokenizers, whose Oniguruma `\s` is White_Space too). The pattern is GPT-2's, with `\s` spelled
// as the property. (tiktoken's own spelling, `\s++$|\s+(?!\S)|\s`, matches the same pieces.)
const GPT2_PATTERN = String
  .raw`'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\p{White_Space}\p{L}\p{N}]+|\p{White_Space}+(?!\P{White_Space})|\p{White_Space}+`;

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
 * rank table is built once (about 50k entries) and shared by every call.
 *
 * @returns The tokenizer.
 *
 * @example The example of tiktoken's own tests
 * ```ts
 * import assert from "node:assert/strict";
 * import { gpt2Tokenizer } from "./mod.ts";
 * const enc = gpt2Tokenizer();
 * assert.deepEqual(enc.encode("hello world"), [31373, 995]);
 * assert.deepEqual(enc.encode("hello <|endoftext|>"), [31373, 220, 50256]);
 * assert.equal(enc.decode([31373, 995]), "hello world");
 * ```
 */
export function gpt2Tokenizer(): Gpt2Tokenizer {
  if (cached !== undefined) return cached;
  const bpe = new Tiktoken({ ...gpt2Ranks, pat_str: GPT2_PATTERN });
  const vocabSize = 50257, eot = 50256;
  cached = {
    name: "gpt2",
    vocabSize,
    eot,
    encode: (text) => bpe.encode(text, [EOT_TEXT], []),
    encodeOrdinary: (text) => bpe.encode(text, [], []),
    decode(ids) {
      const list = Array.from(ids);
      for (let i = 0; i < list.length; i++) {
        const id = list[i];
        if (!Number.isInteger(id) || id < 0 || id >= vocabSize) {
          throw new RangeError(
            `gpt2 tokenizer: id ${id} at position ${i} is outside the vocabulary [0, ${vocabSize})`,
          );
        }
      }
      return bpe.decode(list);
    },
    toMeta: (): TokenizerMeta => ({ tokenizer: "gpt2", vocabSize, eot }),
  };
  return cached;
}
