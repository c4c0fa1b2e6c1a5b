/**
 * Text that GPT-2's pre-tokenizer and BPE find hard, for the tokenizer and prepare tests: a
 * byte-order mark first and inside, \r\n, long whitespace runs ending in text, in a newline or at
 * the end, Unicode's other spaces (NEL, NBSP, em and ideographic spaces), contractions in both
 * cases, numbers in several scripts, emoji with joiners and modifiers, right-to-left scripts,
 * a literal `<|endoftext|>` and a long run of one letter.
 * @module
 */

/** The hard text, as lines (each ends in its own line break). */
export const TRICKY_LINES: readonly string[] = [
  "\uFEFFByte-order mark first, then words.\r\n",
  "Contractions: it's, don't, they're, we've, I'm, you'll, he'd; IT'S DON'T 'S 'T 'd's''s\n",
  "Numbers 1234567890 3.14159 1,000,000 -42 \u0661\u0662\u0663 \u4e8c\u5341 \u2167 \u00bd\n",
  "Emoji \u{1F917}\u{1F389}\u{1F469}\u200D\u{1F469}\u200D\u{1F467} flags \u{1F1EB}\u{1F1F7} " +
  "skin \u{1F44D}\u{1F3FD}!!\n",
  "Unicode: na\u00efve caf\u00e9 \u0395\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ac " +
  "\u0440\u0443\u0441\u0441\u043a\u0438\u0439 \u65e5\u672c\u8a9e \ud55c\uad6d\uc5b4 " +
  "\u0627\u0644\u0639\u0631\u0628\u064a\u0629 \u05e2\u05d1\u05e8\u05d9\u05ea\n",
  "Whitespace runs:" + " ".repeat(40) + "x\t\t\ty" + "\n".repeat(7) +
  "z \u0085 \u00a0\u2003 \u3000end\r\n\r\n",
  " \uFEFF mid-text BOM, \uFEFF\uFEFF twice, and NEL\u0085after \u0085\u0085 x\n",
  "trailing spaces   \n   leading spaces\n\n\n   \n\t\n \n",
  "<|endoftext|> literal<|endoftext|>and long " + "a".repeat(300) + " " + "!".repeat(50) + "\n",
  "tabs\tand\u000bvertical\u000cfeeds \u2028line\u2029para \u200bzero-width\n",
  "    indented code() { return x_1 + y2; } // \u00a9 2024 \u2014 \u201cquotes\u201d\n",
];

/** The hard text in one string, ending in a whitespace run (which only the last chunk holds). */
export const TRICKY_TEXT = TRICKY_LINES.join("") + "  \n \t ";
