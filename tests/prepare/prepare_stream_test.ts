// prepare's gpt2 path streams its inputs in blocks and encodes chunks cut at safe boundaries on
// several workers: the ids are js-tiktoken's for each part, as a one-shot encode of the whole
// corpus gives them (nanoGPT's prepare), for any worker count, chunk and block size; and its
// memory does not grow with the input.
import assert from "node:assert/strict";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Tiktoken } from "js-tiktoken/lite";
import gpt2Ranks from "js-tiktoken/ranks/gpt2";
import { GPT2_PATTERN, gpt2Encoder } from "../../src/data/_gpt2_bpe.ts";
import { FORTUNES_ROOT } from "../../src/data/mod.ts";
import { safeBoundary } from "../../src/prepare/_split.ts";
import { prepare } from "../../src/prepare/prepare.ts";
import { ROOT, runDeno, withTempDir } from "../_harness/processes.ts";
import { TRICKY_LINES, TRICKY_TEXT } from "../data/_tricky_text.ts";

const reference = new Tiktoken({ ...gpt2Ranks, pat_str: GPT2_PATTERN });
const encode = (text: string) => reference.encode(text, [], []);
/** Debian's fortunes (bootstrap.sh installs the package): English prose CI always has. */
const FORTUNES = join(FORTUNES_ROOT, "fortunes");
const prose = existsSync(FORTUNES) ? readFileSync(FORTUNES, "utf8") : "";

Deno.test("safeBoundary: the ids of the parts cut at any safe boundary, joined, are the whole's", async () => {
  const text = TRICKY_TEXT + prose.slice(0, 3000);
  const whole = encode(text);
  // The fast encoder (held to js-tiktoken's ids in tests/data/tokenizer_bpe_test.ts) keeps this
  // quick: every cut encodes the whole text again.
  const bpe = await gpt2Encoder();
  assert.deepEqual(Array.from(bpe.encodeOrdinary(text)), whole);
  let cuts = 0;
  for (let at = safeBoundary(text, 1); at >= 0; at = safeBoundary(text, at + 1), cuts++) {
    const parts = [...bpe.encodeOrdinary(text.slice(0, at)), ...bpe.encodeOrdinary(text.slice(at))];
    assert.deepEqual(parts, whole, `cut at ${at}: ${JSON.stringify(text.slice(at - 5, at + 5))}`);
  }
  assert.ok(cuts > (prose ? 300 : 60), `${cuts} cuts`);
  // The test can tell: a cut between a space and the word after it changes the ids.
  const unsafe = text.indexOf(" then");
  assert.notDeepEqual(
    [...encode(text.slice(0, unsafe + 1)), ...encode(text.slice(unsafe + 1))],
    whole,
  );
  assert.equal(safeBoundary("to be  or", 3), 5);
  assert.equal(safeBoundary("   ", 0), -1);
  assert.equal(safeBoundary("a\u0085b", 0), 1, "NEL is White_Space, as in tiktoken's regex");
  assert.equal(safeBoundary("a\uFEFFb", 0), -1, "U+FEFF is not, though JavaScript's \\s holds it");
});

/**
 * What prepare must write, by the definition of nanoGPT's prepare: the corpus cut at code point
 * floor(n * 0.9), each file's part of each side encoded whole by js-tiktoken, and with `eot`
 * 50256 after each non-empty file, on the side that holds its last character.
 */
function expectedBins(texts: string[], eot: boolean): { train: number[]; val: number[] } {
  const n = texts.reduce((sum, t) => sum + [...t].length, 0);
  const cut = Math.floor(n * 0.9);
  const train: number[] = [], val: number[] = [];
  let done = 0;
  for (const text of texts) {
    const chars = [...text];
    const inTrain = Math.max(0, Math.min(chars.length, cut - done));
    train.push(...encode(chars.slice(0, inTrain).join("")));
    val.push(...encode(chars.slice(inTrain).join("")));
    done += chars.length;
    if (eot && chars.length > 0) (done <= cut ? train : val).push(50256);
  }
  return { train, val };
}

const readIds = (path: string) => Array.from(new Uint16Array(readFileSync(path).buffer));

Deno.test("prepare gpt2: js-tiktoken's ids for 1, 2 and 3 workers, tiny chunks and blocks, many files", async () => {
  await withTempDir("prepare-stream", async (dir) => {
    const texts = [
      prose.slice(0, 150_000) || TRICKY_TEXT.repeat(40),
      TRICKY_TEXT,
      "",
      " \n\t  ",
      TRICKY_LINES.slice(3).join("").repeat(30) + "end without a newline",
    ];
    const inputs = texts.map((text, i) => {
      const path = join(dir, `in${i}.txt`);
      writeFileSync(path, text);
      return path;
    });
    const expected = expectedBins(texts, true);
    const runs = [
      { workers: 1 },
      { workers: 2 },
      { workers: 1, chunkChars: 7, blockBytes: 5 },
      { workers: 2, chunkChars: 7, blockBytes: 5 },
      { workers: 3, chunkChars: 64, blockBytes: 13 },
    ];
    for (const run of runs) {
      const out = join(dir, `out-${Object.values(run).join("-")}`);
      const meta = await prepare({ tokenizer: "gpt2", inputs, out, eot: true, ...run });
      const what = JSON.stringify(run);
      assert.deepEqual(readIds(join(out, "train.bin")), expected.train, `${what} train.bin`);
      assert.deepEqual(readIds(join(out, "val.bin")), expected.val, `${what} val.bin`);
      assert.equal(meta.trainTokens, expected.train.length);
      assert.equal(meta.valTokens, expected.val.length);
    }
  });
});

Deno.test("deno task prepare --workers: refuses a bad count naming the flag", async () => {
  for (const bad of ["0", "1.5", "many", ""]) {
    const run = await runDeno({
      args: ["prepare", "--tokenizer", "gpt2", "--input", "x", "--out", "y", "--workers", bad],
      task: true,
      timeoutMs: 60_000,
      cwd: ROOT,
    });
    assert.equal(run.code, 2, run.stderr);
    assert.match(
      run.stderr,
      new RegExp(`--workers: must be a whole number at least 1, got "${bad}"`),
    );
  }
});

Deno.test("prepare gpt2's memory does not grow with the input: 3 MB and 12 MB in a 48 MB heap", async () => {
  await withTempDir("prepare-memory", async (dir) => {
    // Distinct numbered lines, so that the ids' cache keeps filling and emptying.
    const line = (i: number) => `line ${i}: to be, or not to be, that is the question ${i * 7}\n`;
    const write = (path: string, bytes: number) => {
      const file = Deno.openSync(path, { write: true, create: true });
      const encoder = new TextEncoder();
      for (let i = 0, size = 0; size < bytes; i += 1000) {
        const block = Array.from({ length: 1000 }, (_, k) => line(i + k)).join("");
        file.writeSync(encoder.encode(block));
        size += block.length;
      }
      file.close();
    };
    const peaks: number[] = [];
    for (const mb of [3, 12]) {
      const input = join(dir, `in${mb}.txt`);
      write(input, mb << 20);
      // One worker: the main thread reads, cuts, encodes and writes, so its heap is all of it
      // (each worker's heap is bounded the same way). The heap is capped so that V8 collects
      // rather than grows: what is left is what prepare holds, where reading the input whole
      // held its text twice (over 30 MB more for the larger input).
      const run = await new Deno.Command(Deno.execPath(), {
        args: [
          "run",
          "-A",
          "--v8-flags=--max-old-space-size=48",
          join(ROOT, "tests/prepare/_rss_probe.ts"),
          join(dir, `out${mb}`),
          input,
        ],
        env: { PROBE_WORKERS: "1" },
        cwd: ROOT,
        stdout: "piped",
        stderr: "piped",
      }).output();
      const stdout = new TextDecoder().decode(run.stdout);
      assert.ok(run.success, new TextDecoder().decode(run.stderr));
      peaks.push(JSON.parse(stdout.trim().split("\n").at(-1)!).peak);
      Deno.removeSync(input);
    }
    const [small, large] = peaks.map((p) => p / 2 ** 20);
    // Streamed, the two peaks differ by the ids' cache filling (up to 8 MiB seen); an input held
    // as text (twice, as UTF-16) would add over 20 MiB for the larger one.
    assert.ok(
      large - small < 16,
      `peak ${small.toFixed(0)} MiB for 3 MB, ${large.toFixed(0)} MiB for 12 MB`,
    );
  });
});
