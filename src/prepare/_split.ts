/**
 * Where prepare may cut a corpus: the train/validation split at a code point (as Python's
 * `data[:int(n*0.9)]` counts characters), and chunk boundaries at which GPT-2's BPE gives the same
 * ids for the parts as for the whole, so that large inputs encode in pieces with progress.
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

const WHITE_SPACE = /\p{White_Space}/u;

// [Note: safe chunk boundaries] GPT-2's pattern (src/data/tokenizer_gpt2.ts) matches a newline
// only in a run of whitespace, so in "X\nY" with X and Y not whitespace the "\n" is a piece of its
// own, whether the text goes on after it (it is then matched by `\s+`) or ends there (by
// `\s+(?!\S)`), and the next piece starts at Y either way: the pieces, hence the ids, of the two
// parts cut after the "\n" are those of the whole. A character tokenizer may cut anywhere but
// inside a surrogate pair, which such a cut never is.

/**
 * The end of the chunk that starts at `start`: the first safe boundary (after a newline between
 * two characters that are not whitespace) at or after `start + size`, or `end` when there is none
 * before it.
 *
 * @param text The text.
 * @param start Where the chunk starts.
 * @param end Where the text to encode ends.
 * @param size The least chunk length wanted (UTF-16 units).
 * @returns Where the chunk ends.
 */
export function chunkEnd(text: string, start: number, end: number, size: number): number {
  let from = start + size;
  while (from < end) {
    const newline = text.indexOf("\n", from - 1);
    const cut = newline + 1;
    if (newline < 0 || cut >= end) return end;
    if (newline > start && !WHITE_SPACE.test(text[newline - 1]) && !WHITE_SPACE.test(text[cut])) {
      return cut;
    }
    from = cut + 1;
  }
  return end;
}
