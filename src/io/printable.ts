/**
 * Echoing a value from a file the user does not control into an error message: escaped, so that
 * control bytes (a terminal's escape sequences, a carriage return that hides the line) and
 * characters that reorder text never reach the terminal raw, and cut short, so that a megabyte of
 * garbage stays one line.
 * @module
 */

/** What JSON.stringify leaves raw but a terminal acts on: DEL, C1 controls, separators, bidi. */
const UNSAFE = /[\u007f-\u009f\u00ad\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]/g;
/** C0 controls and unpaired surrogates (what JSON.stringify escapes but for `"` and `\`). */
const CONTROL =
  // deno-lint-ignore no-control-regex -- the control characters are what it finds
  /[\u0000-\u001f]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;
/** JSON's short escapes. */
const SHORT: Record<string, string> = {
  "\b": "\\b",
  "\t": "\\t",
  "\n": "\\n",
  "\f": "\\f",
  "\r": "\\r",
};

/** Characters of an echoed value kept before it is cut. */
const MAX_ECHO = 200;

/**
 * `text` with every control and invisible formatting character written as a `\uXXXX` escape (C0
 * controls as JSON writes them), cut to 200 characters with how many more there were.
 *
 * @param text Text from a file or a peer, as read.
 * @returns The same text, safe to print.
 *
 * @example A terminal escape sequence is printed, not obeyed
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { printable } from "./printable.ts";
 * equal(printable("x\u001b[31m = 1"), "x\\u001b[31m = 1");
 * ```
 */
export function printable(text: string): string {
  return cut(text.replace(CONTROL, (c) => SHORT[c] ?? hex(c)).replace(UNSAFE, hex));
}

/**
 * A value as an error message echoes it: a string in double quotes with JSON's escapes (and
 * those of {@linkcode printable}), a number as JavaScript writes it (`Infinity`, never JSON's
 * `null`), anything else as JSON; cut to 200 characters.
 *
 * @param value The value seen.
 * @returns Its text, safe to print.
 *
 * @example
 * ```ts
 * import { equal } from "node:assert/strict";
 * import { quote } from "./printable.ts";
 * equal(quote("a\u0007"), '"a\\u0007"');
 * equal(quote(Infinity), "Infinity");
 * equal(quote({ n: 1 }), '{"n":1}');
 * ```
 */
export function quote(value: unknown): string {
  if (typeof value === "number" || typeof value === "bigint") return String(value);
  if (value === undefined) return "undefined";
  let text: string;
  try {
    text = JSON.stringify(value) ?? String(value);
  } catch {
    text = Object.prototype.toString.call(value); // a cycle, say
  }
  return cut(text.replace(UNSAFE, hex));
}

function hex(c: string): string {
  return `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`;
}

function cut(text: string): string {
  if (text.length <= MAX_ECHO) return text;
  return `${text.slice(0, MAX_ECHO)}... (${text.length - MAX_ECHO} more characters)`;
}
