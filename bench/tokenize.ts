/**
 * GPT-2 tokenization throughput, side by side in one run on the same text: js-tiktoken (what
 * `deno task prepare` used before), gpt-tokenizer (when Deno's npm cache holds it), dtrain's
 * encoder alone (one thread, cold cache), and `prepare` end to end (file in, `.bin` out) with one
 * worker and with every core. Every dtrain row is checked to give js-tiktoken's ids.
 *
 * ```sh
 * deno run -A --no-lock bench/tokenize.ts [--input FILE] [--repeat 4] [--workers N] [--big-repeat 4]
 * ```
 * `--no-lock` lets gpt-tokenizer load from the cache without touching deno.lock; without it the
 * row says why it is missing. The text is the input repeated `--repeat` times (Tiny Shakespeare
 * by default); repetition favours the caches of dtrain and gpt-tokenizer, so the cold row
 * (one copy, a fresh encoder) is printed too. prepare also runs on the text repeated
 * `--big-repeat` times more, where its workers' start-up (each loads the rank table) matters less.
 * @module
 */

import { parseArgs } from "node:util";
import { join } from "node:path";
import { Tiktoken } from "js-tiktoken/lite";
import gpt2Ranks from "js-tiktoken/ranks/gpt2";
import { BytePairEncoder } from "../src/data/bpe.ts";
import { GPT2_PATTERN } from "../src/data/_gpt2_bpe.ts";
import { prepare } from "../src/prepare/prepare.ts";

/** gpt-tokenizer's GPT-2 encoding (r50k_base), built at run time so nothing else needs it. */
const GPT_TOKENIZER = ["npm:gpt-tokenizer@2.9.0", "encoding", "r50k_base"].join("/");

const { values } = parseArgs({
  args: Deno.args,
  options: {
    input: {
      type: "string",
      default: new URL("../../shared/data/tinyshakespeare/input.txt", import.meta.url).pathname,
    },
    repeat: { type: "string", default: "4" },
    workers: { type: "string", default: String(navigator.hardwareConcurrency) },
    "big-repeat": { type: "string", default: "4" },
  },
});
const once = new TextDecoder("utf-8", { ignoreBOM: true }).decode(Deno.readFileSync(values.input!));
const corpus = once.repeat(Number(values.repeat));
const workers = Number(values.workers);

interface Row {
  name: string;
  tokens: number;
  seconds: number;
  note: string;
}
const rows: Row[] = [];

function time<T>(run: () => T): [T, number] {
  const start = performance.now();
  const result = run();
  return [result, (performance.now() - start) / 1000];
}

const sameIds = (ids: ArrayLike<number>, expected: number[]) =>
  ids.length === expected.length && expected.every((id, i) => ids[i] === id);

const reference = new Tiktoken({ ...gpt2Ranks, pat_str: GPT2_PATTERN });
const [expected, refSeconds] = time(() => reference.encode(corpus, [], []));
rows.push({
  name: "js-tiktoken 1.0.21, 1 thread",
  tokens: expected.length,
  seconds: refSeconds,
  note: "reference ids",
});

try {
  const { encode } = await import(GPT_TOKENIZER) as { encode: (text: string) => number[] };
  const [ids, seconds] = time(() => encode(corpus));
  rows.push({
    name: "gpt-tokenizer 2.9.0 r50k_base, 1 thread",
    tokens: ids.length,
    seconds,
    note: sameIds(ids, expected) ? "same ids" : "DIFFERENT ids",
  });
} catch (error) {
  console.log(`gpt-tokenizer: not available (${(error as Error).message.split("\n")[0]})`);
}

const [cold, coldSeconds] = time(() =>
  new BytePairEncoder(gpt2Ranks, GPT2_PATTERN).encodeOrdinary(once)
);
rows.push({
  name: "dtrain encoder, 1 thread, one copy, cold cache",
  tokens: cold.length,
  seconds: coldSeconds,
  note: sameIds(cold, reference.encode(once, [], [])) ? "same ids" : "DIFFERENT ids",
});
const [warm, warmSeconds] = time(() =>
  new BytePairEncoder(gpt2Ranks, GPT2_PATTERN).encodeOrdinary(corpus)
);
rows.push({
  name: "dtrain encoder, 1 thread (rank table excluded)",
  tokens: warm.length,
  seconds: warmSeconds,
  note: sameIds(warm, expected) ? "same ids" : "DIFFERENT ids",
});

const dir = Deno.makeTempDirSync({ prefix: "dtrain-bench-tokenize-" });
try {
  // prepare end to end, on the same text (ids checked against js-tiktoken's) and on a larger
  // file, where the workers' fixed cost (each loads the rank table) is small next to the work
  // (ids checked equal across worker counts).
  for (
    const [what, repeat] of [["", 1], [" (larger file)", Number(values["big-repeat"])]] as const
  ) {
    const input = join(dir, "input.txt");
    Deno.writeTextFileSync(input, corpus.repeat(repeat));
    let first: Uint8Array | undefined;
    for (const count of [...new Set([1, workers])]) {
      const out = join(dir, `out-${count}`);
      const start = performance.now();
      const meta = await prepare({
        tokenizer: "gpt2",
        inputs: [input],
        out,
        valFraction: 0,
        force: true,
        workers: count,
      });
      const seconds = (performance.now() - start) / 1000;
      const bytes = Deno.readFileSync(join(out, "train.bin"));
      first ??= bytes;
      const same = repeat === 1
        ? sameIds(new Uint16Array(bytes.buffer), expected)
        : bytes.length === first.length && bytes.every((b, k) => b === first![k]);
      rows.push({
        name: `dtrain prepare --workers ${count}, file to .bin${what}`,
        tokens: meta.trainTokens,
        seconds,
        note: same ? (repeat === 1 ? "same ids" : "same as --workers 1") : "DIFFERENT ids",
      });
    }
  }
} finally {
  Deno.removeSync(dir, { recursive: true });
}

const refRate = expected.length / refSeconds;
console.log(
  `${values.input} x${values.repeat}: ${corpus.length} characters, ${expected.length} tokens; ` +
    `${navigator.hardwareConcurrency} cores, load average ${
      Deno.loadavg().map((l) => l.toFixed(1)).join(" ")
    }`,
);
console.log(`| ${"what".padEnd(62)} | tokens/s    | × js-tiktoken | ids |`);
console.log(`|${"-".repeat(64)}|-------------|---------------|-----|`);
for (const row of rows) {
  const rate = row.tokens / row.seconds;
  console.log(
    `| ${row.name.padEnd(62)} | ${(rate / 1e6).toFixed(2).padStart(6)} M/s  | ${
      (rate / refRate).toFixed(1).padStart(12)
    }× | ${row.note} |`,
  );
}
if (rows.some((row) => row.note.startsWith("DIFFERENT") && row.name.startsWith("dtrain"))) {
  Deno.exit(1);
}
