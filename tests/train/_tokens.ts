/**
 * A tiny char-level token data set for the iteration-based train tests, written as nanoGPT's
 * prepare.py writes data/shakespeare_char: train.bin and val.bin (uint16, little-endian) and the
 * vocabulary in meta.json (as `deno task prepare --tokenizer char` writes it).
 * @module
 */

import { join } from "node:path";
import { charTokenizer } from "../../src/data/tokenizer.ts";

/** A few kilobytes of text with a small alphabet and structure a model learns within 20 steps. */
export function tinyText(): string {
  const words = ["the", "cat", "sat", "on", "a", "mat", "and", "dog", "ran", "to", "it"];
  let text = "", state = 7;
  for (let line = 0; line < 200; line++) {
    const n = 3 + (line % 5);
    const picked: string[] = [];
    for (let i = 0; i < n; i++) {
      state = (state * 1103515245 + 12345) % 2 ** 31; // a fixed LCG: the same text every run
      picked.push(words[state % words.length]);
    }
    text += picked.join(" ") + ".\n";
  }
  return text;
}

/** uint16 little-endian bytes of `tokens`, as numpy's `astype(np.uint16).tofile`. */
export function uint16Bytes(tokens: number[]): Uint8Array {
  const bytes = new Uint8Array(tokens.length * 2);
  const view = new DataView(bytes.buffer);
  tokens.forEach((t, i) => view.setUint16(2 * i, t, true));
  return bytes;
}

/**
 * Writes `text`, split 90/10 into train.bin and val.bin, and meta.json (the char tokenizer's)
 * into `dir`; returns the alphabet.
 */
export async function writeCharData(dir: string, text = tinyText()): Promise<string[]> {
  await Deno.mkdir(dir, { recursive: true });
  const tokenizer = charTokenizer(text);
  const ids = Array.from(tokenizer.encode(text));
  const cut = Math.floor(ids.length * 0.9);
  await Deno.writeFile(join(dir, "train.bin"), uint16Bytes(ids.slice(0, cut)));
  await Deno.writeFile(join(dir, "val.bin"), uint16Bytes(ids.slice(cut)));
  await Deno.writeTextFile(join(dir, "meta.json"), JSON.stringify(tokenizer.toMeta()));
  return [...tokenizer.itos];
}

/** The output of a run without the launcher's `[rank N] ` prefixes. */
export function unprefixed(stdout: string): string {
  return stdout.replace(/^\[rank \d+\] /gm, "");
}

/** nanoGPT's log lines of a run: `step N: train loss X, val loss Y`, `iter N: loss X, ...`. */
export function logLines(stdout: string): {
  evals: { iter: number; train: number; val: number }[];
  iters: number[];
  /** The iteration of each "saving checkpoint" line (that of the evaluation before it). */
  saves: number[];
} {
  const evals: { iter: number; train: number; val: number }[] = [], iters: number[] = [];
  const saves: number[] = [];
  // Under the launcher each line comes with its rank's prefix.
  for (const line of unprefixed(stdout).split("\n")) {
    const e = /^step (\d+): train loss ([\d.]+), val loss ([\d.]+)$/.exec(line);
    if (e) evals.push({ iter: Number(e[1]), train: Number(e[2]), val: Number(e[3]) });
    const i = /^iter (\d+): loss [\d.]+, time [\d.]+ms, mfu -?[\d.]+%(?: \(of [^)]+\))?$/.exec(
      line,
    );
    if (i) iters.push(Number(i[1]));
    if (line.startsWith("saving checkpoint to ")) saves.push(evals.at(-1)?.iter ?? -1);
  }
  return { evals, iters, saves };
}
