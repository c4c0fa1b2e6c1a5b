// The tokenizers: GPT-2's ids against those tiktoken and Hugging Face publish
// (tests/fixtures/tiktoken_gpt2.json), round trips on real text, and the character table.
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import {
  charTokenizer,
  FORTUNES_ROOT,
  fromMeta,
  gpt2Tokenizer,
  type TokenizerMeta,
} from "../../src/data/mod.ts";

interface Case {
  source: string;
  encoding: string;
  text: string;
  ids: number[];
  allowedSpecial?: "all";
  decodeOnly?: true;
}
const fixture: { cases: Case[] } = JSON.parse(
  readFileSync(new URL("../fixtures/tiktoken_gpt2.json", import.meta.url), "utf8"),
);

Deno.test("gpt2Tokenizer gives the ids of tiktoken's and Hugging Face's own gpt2 tests", () => {
  const enc = gpt2Tokenizer();
  assert.ok(fixture.cases.length >= 40, `${fixture.cases.length} cases`);
  for (const c of fixture.cases) {
    const where = `${c.source}: ${JSON.stringify(c.text)}`;
    assert.equal(enc.decode(c.ids), c.text, where);
    if (c.decodeOnly) continue;
    assert.deepEqual(enc.encode(c.text), c.ids, where);
    if (c.allowedSpecial === undefined) assert.deepEqual(enc.encodeOrdinary(c.text), c.ids, where);
  }
});

Deno.test("gpt2Tokenizer: vocabulary, <|endoftext|> as text in encodeOrdinary, ids out of range", () => {
  const enc = gpt2Tokenizer();
  assert.equal(enc.name, "gpt2");
  assert.equal(enc.vocabSize, 50257);
  assert.equal(enc.eot, 50256);
  assert.equal(gpt2Tokenizer(), enc, "one shared instance");
  const ordinary = enc.encodeOrdinary("a<|endoftext|>b");
  assert.ok(!ordinary.includes(50256), `${ordinary}`);
  assert.equal(enc.decode(ordinary), "a<|endoftext|>b");
  assert.deepEqual(enc.encode("a<|endoftext|>b"), [64, 50256, 65]);
  assert.equal(enc.decode(new Int32Array([31373, 995])), "hello world");
  assert.equal(enc.decode(new Uint16Array([50256])), "<|endoftext|>");
  assert.throws(() => enc.decode([31373, 50257]), /id 50257 at position 1 is outside/);
  assert.throws(() => enc.decode([-1]), /id -1 at position 0/);
  assert.deepEqual(fromMeta(enc.toMeta()), enc);
});

Deno.test("gpt2Tokenizer splits at Unicode White_Space as tiktoken's Rust regex (U+0085 yes, U+FEFF no)", () => {
  // [Note: tiktoken's whitespace] in src/data/tokenizer_gpt2.ts: NEL after a space is a
  // whitespace run of its own ("\s+(?!\S)" then "\s+"), not " " joined to punctuation; the BOM is
  // a symbol, taken with the space before it, as in " ?[^\s\p{L}\p{N}]+".
  const enc = gpt2Tokenizer();
  const nel = enc.encode("\u0085");
  assert.deepEqual(enc.encode(" \u00850"), [220, ...nel, 15]);
  assert.notDeepEqual(enc.encode(" \ufeffx"), [220, ...enc.encode("\ufeffx")]);
  assert.deepEqual(enc.encode(" \ufeffx"), [...enc.encode(" \ufeff"), ...enc.encode("x")]);
});

const fortunes = join(FORTUNES_ROOT, "fortunes");

Deno.test({
  name: "gpt2Tokenizer: decode(encode(t)) is t for Debian's fortunes file (needs `fortunes`)",
  ignore: !existsSync(fortunes),
  fn: () => {
    const enc = gpt2Tokenizer();
    const text = readFileSync(fortunes, "utf8");
    const ids = enc.encodeOrdinary(text);
    assert.ok(ids.length > text.length / 8 && ids.length < text.length / 2, `${ids.length}`);
    assert.ok(ids.every((id) => Number.isInteger(id) && id >= 0 && id < 50256));
    assert.equal(enc.decode(ids), text);
  },
});

Deno.test("gpt2Tokenizer: round trips through every byte-level case (controls, emoji, lone surrogate)", () => {
  const enc = gpt2Tokenizer();
  const text = Array.from({ length: 256 }, (_, i) => String.fromCharCode(i)).join("") +
    " 🤗 héllo\r\n\t  x's we'll 1,000 <|endoftext|>";
  assert.equal(enc.decode(enc.encodeOrdinary(text)), text);
  // As tiktoken: a lone surrogate is encoded as U+FFFD.
  assert.equal(enc.decode(enc.encode("a\ud83db")), "a\ufffdb");
});

Deno.test("charTokenizer: the sorted character set of nanoGPT's shakespeare_char prepare", () => {
  const text = "First Citizen:\nBefore we proceed any further, hear me speak.\n";
  const tok = charTokenizer(text);
  const chars = [...new Set(text)].sort();
  assert.equal(tok.name, "char");
  assert.equal(tok.vocabSize, chars.length);
  assert.deepEqual(tok.itos, chars);
  assert.deepEqual(tok.itos.slice(0, 4), ["\n", " ", ",", "."]);
  const ids = tok.encode(text);
  assert.deepEqual(ids, [...text].map((c) => chars.indexOf(c)));
  assert.equal(tok.decode(ids), text);
  assert.equal(tok.decode(new Uint16Array(ids)), text);
});

Deno.test("charTokenizer: characters are code points in code-point order, as Python's sorted(set(s))", () => {
  // UTF-16 order would put U+FFFD after the surrogates of 😀 (U+1F600); code-point order before.
  const tok = charTokenizer("😀\ufffdab😀");
  assert.deepEqual(tok.itos, ["a", "b", "\ufffd", "😀"]);
  assert.deepEqual(tok.encode("😀a"), [3, 0]);
  assert.equal(tok.decode([3, 2]), "😀\ufffd");
});

Deno.test("charTokenizer: unknown characters and ids name themselves", () => {
  const tok = charTokenizer("abc");
  assert.throws(() => tok.encode("abz"), /character "z" \(U\+007A\) at position 2 is not in the/);
  assert.throws(() => tok.decode([0, 3]), /id 3 at position 1 is outside the vocabulary \[0, 3\)/);
});

Deno.test("fromMeta rebuilds a character table from its JSON, and refuses a broken one", () => {
  const tok = charTokenizer("hello, world");
  const meta = JSON.parse(JSON.stringify(tok.toMeta())) as TokenizerMeta;
  assert.deepEqual(meta, {
    tokenizer: "char",
    vocabSize: 9,
    itos: [" ", ",", "d", "e", "h", "l", "o", "r", "w"],
    stoi: { " ": 0, ",": 1, d: 2, e: 3, h: 4, l: 5, o: 6, r: 7, w: 8 },
  });
  const again = fromMeta(meta);
  assert.deepEqual(again.encode("hello"), tok.encode("hello"));
  assert.equal(again.decode(tok.encode("world")), "world");
  const broken = (patch: Record<string, unknown>) => fromMeta({ ...meta, ...patch });
  assert.throws(() => broken({ tokenizer: "bpe" }), /tokenizer meta: tokenizer: /);
  assert.throws(() => broken({ vocabSize: 10 }), /itos has 9 characters, vocabSize is 10/);
  assert.throws(
    () => broken({ stoi: { ...meta.tokenizer === "char" && meta.stoi, d: 3 } }),
    /stoi\["d"\] is 3/,
  );
  assert.throws(
    () => broken({ itos: ["ab", ...(meta as { itos: string[] }).itos.slice(1)] }),
    /itos\.0 is "ab"/,
  );
  assert.throws(() => fromMeta({ tokenizer: "gpt2", vocabSize: 50000, eot: 50256 }), /vocabSize/);
});
