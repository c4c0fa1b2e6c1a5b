// GPT-2's fast BPE (src/data/bpe.ts, behind gpt2Tokenizer and prepare) gives js-tiktoken's ids, in
// the same order, on real text and on text built to be hard; it stays correct past its cache's
// limit; and importing dtrain resolves no npm package (the rank table is imported on first use).
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { Tiktoken } from "js-tiktoken/lite";
import gpt2Ranks from "js-tiktoken/ranks/gpt2";
import { BytePairEncoder } from "../../src/data/bpe.ts";
import { GPT2_PATTERN, gpt2Encoder, JS_TIKTOKEN } from "../../src/data/_gpt2_bpe.ts";
import { FORTUNES_ROOT, gpt2Tokenizer } from "../../src/data/mod.ts";
import { ROOT } from "../_harness/processes.ts";
import { TRICKY_TEXT } from "./_tricky_text.ts";

/** js-tiktoken with GPT-2's ranks and dtrain's pattern: the ids the fast path must give. */
const reference = new Tiktoken({ ...gpt2Ranks, pat_str: GPT2_PATTERN });

const SHAKESPEARE = join(ROOT, "../shared/data/tinyshakespeare/input.txt");

/** Fails at the first id that differs, showing the text around it. */
function assertSameIds(actual: ArrayLike<number>, expected: number[], what: string): void {
  const n = Math.min(actual.length, expected.length);
  for (let i = 0; i < n; i++) {
    if (actual[i] !== expected[i]) {
      const around = (ids: ArrayLike<number>) => reference.decode(Array.from(ids).slice(i, i + 4));
      assert.fail(
        `${what}: id ${i} is ${actual[i]} ${JSON.stringify(around(actual))}, ` +
          `js-tiktoken has ${expected[i]} ${JSON.stringify(around(expected))}`,
      );
    }
  }
  assert.equal(actual.length, expected.length, `${what}: number of ids`);
}

Deno.test("BytePairEncoder gives js-tiktoken's ids on hard text, with and without <|endoftext|>", async () => {
  const bpe = new BytePairEncoder(gpt2Ranks, GPT2_PATTERN);
  const ordinary = reference.encode(TRICKY_TEXT, [], []);
  assert.ok(ordinary.length > 400, `${ordinary.length} ids`);
  assertSameIds(bpe.encodeOrdinary(TRICKY_TEXT), ordinary, "cold cache");
  assertSameIds(bpe.encodeOrdinary(TRICKY_TEXT), ordinary, "warm cache");
  const special = new Map([["<|endoftext|>", 50256]]);
  const withEot = reference.encode(TRICKY_TEXT, ["<|endoftext|>"], []);
  assert.ok(withEot.includes(50256));
  assertSameIds(bpe.encodeWithSpecial(TRICKY_TEXT, special), withEot, "allowed special");
  assert.equal(
    new TextDecoder("utf-8", { ignoreBOM: true }).decode(bpe.decodeBytes(ordinary)),
    TRICKY_TEXT,
  );
  const enc = await gpt2Tokenizer();
  assert.equal(enc.decode(ordinary), TRICKY_TEXT, "a leading U+FEFF decodes, as tiktoken's decode");
});

Deno.test("BytePairEncoder gives js-tiktoken's ids on random strings of hard characters", () => {
  const bpe = new BytePairEncoder(gpt2Ranks, GPT2_PATTERN);
  const palette = [..." \t\n\r\u0085\u00a0\u3000\uFEFFaZ\u00e9\u4e8c9\u0661'.,!-_<|>sStTdmlrev"]
    .concat(["\u{1F917}", "\ud800", "\udc00", "\u{1F3FD}", "\u200d"]);
  let seed = 12345;
  const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
  for (let round = 0; round < 300; round++) {
    let text = "";
    const length = 1 + Math.floor(random() * 60);
    for (let i = 0; i < length; i++) text += palette[Math.floor(random() * palette.length)];
    assertSameIds(bpe.encodeOrdinary(text), reference.encode(text, [], []), JSON.stringify(text));
  }
});

Deno.test({
  name: "gpt2Tokenizer gives js-tiktoken's ids on Tiny Shakespeare",
  ignore: !existsSync(SHAKESPEARE),
  fn: async () => {
    const enc = await gpt2Tokenizer();
    const shakespeare = readFileSync(SHAKESPEARE, "utf8");
    const expected = reference.encode(shakespeare, [], []);
    assert.equal(expected.length, 338_025, "nanoGPT's shakespeare prepare: 301,966 + 36,059");
    assertSameIds(enc.encodeOrdinary(shakespeare), expected, "Tiny Shakespeare");
  },
});

Deno.test({
  // Debian's fortunes package, which bootstrap.sh installs: the corpus CI always has.
  name: "gpt2Tokenizer gives js-tiktoken's ids on every file of Debian's fortunes",
  ignore: !existsSync(FORTUNES_ROOT),
  fn: async () => {
    const enc = await gpt2Tokenizer();
    let files = 0;
    for (const name of readdirSync(FORTUNES_ROOT).filter((f) => !/\.(dat|u8)$/.test(f))) {
      const path = join(FORTUNES_ROOT, name);
      if (!Deno.statSync(path).isFile) continue;
      const text = new TextDecoder().decode(readFileSync(path));
      assertSameIds(enc.encodeOrdinary(text), reference.encode(text, [], []), `fortunes ${name}`);
      files++;
    }
    assert.ok(files >= 5, `only ${files} fortunes files`);
  },
});

Deno.test("BytePairEncoder stays exact past its cache's limit, and on pieces too long to cache", () => {
  // 20,000 distinct words through a cache of 1,000: it empties many times on the way.
  const bpe = new BytePairEncoder(gpt2Ranks, GPT2_PATTERN, 1000);
  const words: string[] = [];
  for (let i = 0; i < 20_000; i++) words.push(" w" + i.toString(36) + "q" + (i % 7 ? "" : " w0q"));
  const text = words.join("") + " " + "x".repeat(1000) + " ".repeat(600) + "end";
  assertSameIds(bpe.encodeOrdinary(text), reference.encode(text, [], []), "many words");
});

Deno.test("gpt2Encoder imports the js-tiktoken of deno.json, and importing mod.ts resolves no npm package", async () => {
  const imports = JSON.parse(readFileSync(join(ROOT, "deno.json"), "utf8")).imports;
  assert.equal(JS_TIKTOKEN, imports["js-tiktoken"]);
  assert.equal(await gpt2Encoder(), await gpt2Encoder(), "one encoder per thread");
  const info = await new Deno.Command(Deno.execPath(), {
    args: ["info", "--json", "mod.ts"],
    cwd: ROOT,
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.ok(info.success, new TextDecoder().decode(info.stderr));
  const graph = JSON.parse(new TextDecoder().decode(info.stdout));
  const npm = graph.modules.filter((m: { specifier: string }) => m.specifier.startsWith("npm:"))
    .map((m: { specifier: string }) => m.specifier);
  assert.ok(!npm.some((s: string) => /tiktoken|base64/.test(s)), `mod.ts resolves ${npm}`);
  assert.ok(
    graph.modules.some((m: { specifier: string }) => m.specifier.endsWith("src/data/_gpt2_bpe.ts")),
    "the graph holds the module that imports the ranks on first use",
  );
});
