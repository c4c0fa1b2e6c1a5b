/**
 * Where a file stops being UTF-8: prepare refuses such input naming the byte, as nanoGPT's
 * prepare.py raises UnicodeDecodeError ("can't decode byte 0xff in position 5"), unless asked to
 * replace it.
 * @module
 */

/**
 * The offset of the first byte that does not begin a well-formed UTF-8 sequence (WHATWG's and
 * Python's strict decoders agree: no overlong forms, surrogates or code points past U+10FFFF),
 * or -1 when every byte does.
 *
 * @param bytes The file's bytes.
 * @returns The offset, or -1.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { invalidUtf8At } from "./_utf8.ts";
 * equal(invalidUtf8At(new TextEncoder().encode("naïve")), -1);
 * equal(invalidUtf8At(Uint8Array.of(0x61, 0xc3, 0xa9, 0xff)), 3);
 * equal(invalidUtf8At(Uint8Array.of(0xed, 0xa0, 0x80)), 0); // a surrogate
 * ```
 */
export function invalidUtf8At(bytes: Uint8Array): number {
  for (let i = 0; i < bytes.length;) {
    const lead = bytes[i];
    if (lead < 0x80) {
      i++;
      continue;
    }
    // The continuation bytes' count, and the range of the first (which rules out overlong
    // forms, surrogates and code points past U+10FFFF).
    let more: number, low = 0x80, high = 0xbf;
    if (lead >= 0xc2 && lead <= 0xdf) more = 1;
    else if (lead >= 0xe0 && lead <= 0xef) {
      more = 2;
      if (lead === 0xe0) low = 0xa0;
      if (lead === 0xed) high = 0x9f;
    } else if (lead >= 0xf0 && lead <= 0xf4) {
      more = 3;
      if (lead === 0xf0) low = 0x90;
      if (lead === 0xf4) high = 0x8f;
    } else return i;
    for (let k = 1; k <= more; k++) {
      const next = bytes[i + k];
      if (next === undefined || next < (k === 1 ? low : 0x80) || next > (k === 1 ? high : 0xbf)) {
        return i;
      }
    }
    i += more + 1;
  }
  return -1;
}
