/**
 * Where prepare may cut a corpus: the train/validation split at a code point (as Python's
 * `data[:int(n*0.9)]` counts characters), and chunk boundaries at which GPT-2's BPE gives the same
 * ids for the parts as for the whole, so that large inputs stream and encode in parallel pieces.
 * @module
 */

/**
 * The UTF-16 index of code point number `count` of `text` (Python's string index `count`).
 *
 * @param text The text.
 * @param count A code-point index, at most the number of code points.
 * @returns The index into the JavaScript string.
 */
export function codePointOffset(text: string, count: number): number {
  let index = 0;
  for (let seen = 0; seen < count && index < text.length; seen++) {
    const unit = text.charCodeAt(index);
    index += unit >= 0xd800 && unit < 0xdc00 && index + 1 < text.length ? 2 : 1;
  }
  return index;
}

/** The number of code points of `text` (Python's `len`). */
export function codePointLength(text: string): number {
  let pairs = 0;
  for (let i = 0; i + 1 < text.length; i++) {
    const unit = text.charCodeAt(i);
    if (unit >= 0xd800 && unit < 0xdc00) {
      const next = text.charCodeAt(i + 1);
      if (next >= 0xdc00 && next < 0xe000) {
        pairs++;
        i++;
      }
    }
  }
  return text.length - pairs;
}

// [Note: safe chunk boundaries] No piece of GPT-2's pattern (src/data/tokenizer_gpt2.ts) holds a
// character that is not whitespace followed by one that is: the optional space of ` ?\p{L}+`,
// ` ?\p{N}+` and ` ?[^\s\p{L}\p{N}]+` comes first, the contractions hold no whitespace, and the
// whitespace alternatives hold nothing else. So between such two characters the whole text has a
// piece boundary, and since the pattern only looks ahead (one character, in `\s+(?!\S)`), the
// pieces of the part before (ending in the non-whitespace character) and of the part after
// (matched from the same position on the same text) are those of the whole: the ids of the parts,
// joined, are the ids of the whole. tests/prepare/prepare_stream_test.ts holds this on real and
// hostile text cut at every such boundary. A character tokenizer may cut anywhere but inside a
// surrogate pair, which such a cut never is.

/** Unicode's White_Space (the `\s` of tiktoken's Rust regex), as GPT-2's pattern spells it. */
const WHITE_SPACE = /\p{White_Space}/u;

function isWhiteSpace(unit: number): boolean {
  if (unit < 0x80) return unit === 0x20 || (unit >= 0x09 && unit <= 0x0d);
  // White_Space has no astral code points, so one UTF-16 unit decides.
  return WHITE_SPACE.test(String.fromCharCode(unit));
}

/**
 * The first safe boundary of `text` at or after `from`: an index `i` where `text[i - 1]` is not
 * whitespace and `text[i]` is, so that GPT-2's ids of `text.slice(0, i)` and `text.slice(i)`,
 * joined, are those of `text`; -1 when there is none.
 *
 * @param text The text.
 * @param from The least index wanted.
 * @returns The boundary, or -1.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { safeBoundary } from "./_split.ts";
 * equal(safeBoundary("to be  or", 3), 5);
 * equal(safeBoundary("one", 0), -1);
 * ```
 */
export function safeBoundary(text: string, from: number): number {
  let before = from > 0 ? isWhiteSpace(text.charCodeAt(from - 1)) : true;
  for (let i = Math.max(from, 0); i < text.length; i++) {
    const space = isWhiteSpace(text.charCodeAt(i));
    if (space && !before) return i;
    before = space;
  }
  return -1;
}
