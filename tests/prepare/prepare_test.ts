// `deno task prepare`: nanoGPT's train.bin / val.bin / meta.json, its 90/10 split, chunked
// encoding that keeps GPT-2's ids, and the errors, through the library and the command line.
import assert from "node:assert/strict";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { charTokenizer, gpt2Tokenizer, loadMeta } from "../../src/data/mod.ts";
import { prepare, PrepareError } from "../../src/prepare/prepare.ts";
import { ROOT, runDeno, withTempDir } from "../_harness/processes.ts";

function readBin(path: string): number[] {
  const bytes = readFileSync(path);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  return Array.from({ length: bytes.length / 2 }, (_, i) => view.getUint16(2 * i, true));
}

/** A small corpus with what GPT-2's pattern cares about: runs of spaces and newlines, digits. */
function corpus(lines: number): string {
  const words = ["the", "King", "'s", "  men", "1,000", "\n\n", "naïve", "🤗", "\t", "don't"];
  let text = "";
  for (let i = 0; i < lines; i++) {
    text += words.filter((_, j) => (i * 7 + j * 3) % 4 !== 0).join(i % 3 ? " " : "") + "\n";
  }
  return text;
}

Deno.test("prepare char: nanoGPT's data[:int(n*0.9)] split, uint16 ids, and a meta.json that decodes", async () => {
  await withTempDir("prepare-char", async (dir) => {
    const text = corpus(200);
    writeFileSync(join(dir, "input.txt"), text);
    const out = join(dir, "out");
    const meta = await prepare({ tokenizer: "char", inputs: [join(dir, "input.txt")], out });
    const chars = [...text], n = chars.length, cut = Math.floor(n * 0.9);
    const tok = charTokenizer(text);
    assert.equal(meta.vocabSize, new Set(chars).size);
    assert.deepEqual([meta.trainTokens, meta.valTokens], [cut, n - cut]);
    assert.deepEqual(readBin(join(out, "train.bin")), tok.encode(chars.slice(0, cut).join("")));
    assert.deepEqual(readBin(join(out, "val.bin")), tok.encode(chars.slice(cut).join("")));
    const onDisk = JSON.parse(readFileSync(join(out, "meta.json"), "utf8")) as typeof meta & {
      itos: string[];
    };
    assert.deepEqual(onDisk, meta);
    assert.deepEqual(onDisk.itos, tok.itos);
    assert.equal(onDisk.dtype, "uint16");
    const loaded = await loadMeta(out);
    const ids = [...readBin(join(out, "train.bin")), ...readBin(join(out, "val.bin"))];
    assert.equal(loaded.decode(ids), text);
    return Promise.resolve();
  });
});

Deno.test("prepare gpt2: encode_ordinary of each part, --val-fraction, <|endoftext|> after each file with eot", async () => {
  await withTempDir("prepare-gpt2", async (dir) => {
    const a = corpus(30) + "a literal <|endoftext|> stays text\n", b = corpus(11);
    writeFileSync(join(dir, "a.txt"), a);
    writeFileSync(join(dir, "b.txt"), b);
    const enc = await gpt2Tokenizer();
    const out = join(dir, "one");
    const meta = await prepare({
      tokenizer: "gpt2",
      inputs: [join(dir, "a.txt")],
      out,
      valFraction: 0.25,
    });
    const cut = [...a].slice(0, Math.floor([...a].length * 0.75)).join("").length;
    assert.deepEqual(readBin(join(out, "train.bin")), enc.encodeOrdinary(a.slice(0, cut)));
    assert.deepEqual(readBin(join(out, "val.bin")), enc.encodeOrdinary(a.slice(cut)));
    assert.deepEqual(meta, {
      tokenizer: "gpt2",
      vocabSize: 50257,
      eot: 50256,
      dtype: "uint16",
      trainTokens: enc.encodeOrdinary(a.slice(0, cut)).length,
      valTokens: enc.encodeOrdinary(a.slice(cut)).length,
    });
    assert.equal(await loadMeta(out), enc);

    const two = join(dir, "two");
    const files = [join(dir, "a.txt"), join(dir, "b.txt")];
    await prepare({ tokenizer: "gpt2", inputs: files, out: two, valFraction: 0.1, eot: true });
    const whole = a + b,
      wcut = [...whole].slice(0, Math.floor([...whole].length * 0.9)).join("").length;
    assert.ok(wcut > a.length, "b.txt is cut");
    const train = readBin(join(two, "train.bin")), val = readBin(join(two, "val.bin"));
    assert.deepEqual(train, [
      ...enc.encodeOrdinary(a),
      50256,
      ...enc.encodeOrdinary(whole.slice(a.length, wcut)),
    ]);
    assert.deepEqual(val, [...enc.encodeOrdinary(whole.slice(wcut)), 50256]);
    assert.equal(train.filter((id) => id === 50256).length, 1, "the literal one stays text");
    return Promise.resolve();
  });
});

Deno.test("prepare refuses, naming it: unknown tokenizer, missing input, vocabulary over uint16, bad --out", async () => {
  await withTempDir("prepare-errors", async (dir) => {
    const input = join(dir, "in.txt");
    writeFileSync(input, "hello\n");
    const out = join(dir, "out");
    const refuses = (options: Parameters<typeof prepare>[0], message: RegExp) =>
      assert.rejects(
        () => prepare(options),
        (e) => e instanceof PrepareError && message.test(e.message),
      );
    await refuses(
      { tokenizer: "bpe", inputs: [input], out },
      /--tokenizer: unknown tokenizer "bpe"; expected one of gpt2, char/,
    );
    await refuses(
      { tokenizer: "char", inputs: [join(dir, "nope.txt")], out },
      /--input .*nope\.txt: no such file/,
    );
    await refuses(
      { tokenizer: "char", inputs: [dir], out },
      /--input .*: is a directory, not a regular file/,
    );
    await refuses({ tokenizer: "char", inputs: [], out }, /--input: no input file given/);
    await refuses(
      { tokenizer: "char", inputs: [input], out, valFraction: 1 },
      /--val-fraction: must be in \[0, 1\), got 1/,
    );
    await refuses(
      { tokenizer: "char", inputs: [input], out, eot: true },
      /--eot: only the gpt2 tokenizer/,
    );
    const wide = join(dir, "wide.txt");
    writeFileSync(
      wide,
      Array.from({ length: 65537 }, (_, i) => String.fromCodePoint(0x10000 + i)).join(""),
    );
    await refuses(
      { tokenizer: "char", inputs: [wide], out },
      /vocabulary of 65537 tokens has ids up to 65536, more than uint16 holds \(65535\)/,
    );
    await refuses(
      { tokenizer: "char", inputs: [input], out: join(input, "sub") },
      /--out .*in\.txt.sub: cannot create the folder/,
    );
    await refuses(
      { tokenizer: "char", inputs: [input], out: input },
      /--out .*in\.txt: exists and is not a folder/,
    );
    assert.ok(!existsSync(out), "nothing written on refusal");
    return Promise.resolve();
  });
});

Deno.test("prepare keeps an existing train.bin unless force, and leaves no partial file", async () => {
  await withTempDir("prepare-force", async (dir) => {
    const input = join(dir, "in.txt");
    writeFileSync(input, corpus(20));
    const out = join(dir, "out");
    await prepare({ tokenizer: "char", inputs: [input], out });
    const before = readFileSync(join(out, "train.bin"));
    writeFileSync(input, "something else entirely\n");
    await assert.rejects(
      () => prepare({ tokenizer: "char", inputs: [input], out }),
      /--out .*: train\.bin, val\.bin, meta\.json already there; pass --force to overwrite/,
    );
    assert.deepEqual(readFileSync(join(out, "train.bin")), before);
    const meta = await prepare({ tokenizer: "char", inputs: [input], out, force: true });
    assert.equal(meta.trainTokens + meta.valTokens, 24);
    assert.equal(
      (await loadMeta(out)).decode(readBin(join(out, "train.bin"))),
      "something else entire",
    );
    assert.deepEqual(Deno.readDirSync(out).map((e) => e.name).toArray().sort(), [
      "meta.json",
      "train.bin",
      "val.bin",
    ]);
    return Promise.resolve();
  });
});

Deno.test("deno task prepare: writes quietly, exits 2 with the reason on a wrong flag", async () => {
  await withTempDir("prepare-cli", async (dir) => {
    const a = join(dir, "a.txt"), b = join(dir, "b.txt"), out = join(dir, "out");
    writeFileSync(a, "To be, or not to be,\n");
    writeFileSync(b, "that is the question.\n");
    const run = (...args: string[]) =>
      runDeno({ args: ["prepare", ...args], task: true, timeoutMs: 60_000, cwd: ROOT });
    const ok = await run(
      "--tokenizer",
      "char",
      "--input",
      a,
      b,
      "--out",
      out,
      "--val-fraction",
      "0.5",
    );
    assert.equal(ok.code, 0, ok.stderr);
    assert.match(ok.stdout, /char tokenizer, vocabulary 17: 21 train and 22 val tokens in /);
    assert.ok(!/prepare: \[/.test(ok.stderr), `no progress bar off a terminal: ${ok.stderr}`);
    assert.equal(
      (await loadMeta(out)).decode(readBin(join(out, "val.bin"))),
      "that is the question.\n",
    );
    const again = await run("--tokenizer", "char", "--input", a, "--out", out);
    assert.equal(again.code, 2);
    assert.match(
      again.stderr,
      /prepare: --out .*: train\.bin, val\.bin, meta\.json already there; pass --force/,
    );
    const bad = await run("--tokenizer", "words", "--input", a, "--out", out, "--force");
    assert.equal(bad.code, 2);
    assert.match(
      bad.stderr,
      /prepare: --tokenizer: unknown tokenizer "words"; expected one of gpt2, char/,
    );
    const missing = await run("--tokenizer", "gpt2", "--out", out);
    assert.equal(missing.code, 2);
    assert.match(missing.stderr, /--input: missing/);
    const help = await run("--help");
    assert.equal(help.code, 0);
    assert.match(
      help.stdout,
      /usage: deno task prepare --tokenizer gpt2\|char --input FILE\.\.\. --out DIR/,
    );
  });
});

// Tiny Shakespeare, when the project's shared data folder is there (beside the repository) or
// DTRAIN_TINYSHAKESPEARE names the file: the tests never need it.
const shakespeare = Deno.env.get("DTRAIN_TINYSHAKESPEARE") ??
  join(ROOT, "..", "shared", "data", "tinyshakespeare", "input.txt");

Deno.test({
  name: "prepare char on Tiny Shakespeare gives nanoGPT's 65 characters, 1,003,854 train and " +
    "111,540 val tokens (skipped without ../shared/data/tinyshakespeare/input.txt or " +
    "DTRAIN_TINYSHAKESPEARE)",
  ignore: !existsSync(shakespeare),
  fn: async () => {
    await withTempDir("prepare-shakespeare", async (dir) => {
      const meta = await prepare({ tokenizer: "char", inputs: [shakespeare], out: dir });
      assert.deepEqual([meta.vocabSize, meta.trainTokens, meta.valTokens], [
        65,
        1_003_854,
        111_540,
      ]);
      assert.equal(readFileSync(join(dir, "train.bin")).length, 2 * 1_003_854);
      const itos = (meta as { itos: string[] }).itos;
      assert.equal(
        itos.join(""),
        "\n !$&',-.3:;?ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
      );
      return Promise.resolve();
    });
  },
});
