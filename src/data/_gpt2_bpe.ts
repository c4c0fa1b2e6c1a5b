/**
 * GPT-2's {@linkcode BytePairEncoder}: its pre-tokenizer pattern and js-tiktoken's rank table,
 * loaded once per thread (the tokenizer of tokenizer_gpt2.ts and prepare's workers share it).
 * @module
 */

import { BytePairEncoder, type TiktokenRanks } from "./bpe.ts";

/** The npm package whose rank table GPT-2's BPE uses (the version deno.json imports). */
export const JS_TIKTOKEN = "npm:js-tiktoken@1.0.21";

// [Note: tiktoken's whitespace] tiktoken splits text with Rust's regex, whose `\s` is Unicode's
// White_Space property; JavaScript's `\s` differs in two characters: it leaves out U+0085 (NEL)
// and adds U+FEFF (the byte-order mark). js-tiktoken ships GPT-2's pattern with JavaScript's `\s`,
// so " \u0085" or " \uFEFF" would split differently from tiktoken (and from Hugging Face's
// tokenizers, whose Oniguruma `\s` is White_Space too). The pattern is GPT-2's, with `\s` spelled
// as the property. (tiktoken's own spelling, `\s++$|\s+(?!\S)|\s`, matches the same pieces.)
/** GPT-2's pre-tokenizer pattern, with `\s` as Unicode's White_Space (see the note above). */
export const GPT2_PATTERN = String
  .raw`'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\p{White_Space}\p{L}\p{N}]+|\p{White_Space}+(?!\P{White_Space})|\p{White_Space}+`;

let encoder: Promise<BytePairEncoder> | undefined;

/**
 * GPT-2's {@linkcode BytePairEncoder}, built once per thread from js-tiktoken's rank table (what
 * prepare's workers encode with).
 *
 * @returns The encoder.
 */
export function gpt2Encoder(): Promise<BytePairEncoder> {
  encoder ??= (async () => {
    // [Note: lazy rank table] The specifier is built at run time so that Deno does not resolve
    // the npm package when a script imports dtrain (mod.ts) without ever tokenizing with GPT-2:
    // a literal dynamic import is resolved, and fetched, eagerly. It names the package fully
    // (not through deno.json's import map) so that it resolves from a published package too;
    // tests/data/tokenizer_bpe_test.ts holds the version equal to deno.json's.
    const specifier = [JS_TIKTOKEN, "ranks", "gpt2"].join("/");
    // import target: npm:js-tiktoken/ranks/gpt2
    const { default: ranks } = await import(specifier) as { default: TiktokenRanks };
    return new BytePairEncoder(ranks, GPT2_PATTERN);
  })();
  return encoder;
}
