// TokenFile over nanoGPT's headerless uint16 .bin files: get_batch's offsets from dtrain's
// generator, x and y checked against windows decoded here from the raw bytes, and the errors.
import assert from "node:assert/strict";
import { data, manualSeed, randint } from "../../mod.ts";
import { deviceTest } from "../_harness/devices.ts";

/** A nanoGPT .bin file of `n` pseudo-random GPT-2 token ids in a fresh temp dir. */
function writeTokens(n: number, seed = 1): { path: string; bytes: Uint8Array; dir: string } {
  const dir = Deno.makeTempDirSync({ prefix: "dtrain_tokens_" });
  const bytes = new Uint8Array(2 * n);
  const view = new DataView(bytes.buffer);
  let s = seed;
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1103515245) + 12345) >>> 0;
    view.setUint16(2 * i, (s >>> 8) % 50257, true); // little-endian, as numpy writes on x86
  }
  const path = `${dir}/train.bin`;
  Deno.writeFileSync(path, bytes);
  return { path, bytes, dir };
}

/** Row b of x (shift 0) or y (shift 1) at offset i, decoded from the file's bytes. */
function window(bytes: Uint8Array, i: number, t: number, shift: number): number[] {
  const view = new DataView(bytes.buffer);
  return Array.from({ length: t }, (_, k) => view.getUint16(2 * (i + shift + k), true));
}

Deno.test("TokenFile reads a nanoGPT .bin file: length and tokens", async () => {
  const { path, bytes, dir } = writeTokens(1001);
  try {
    const file = await data.TokenFile.open(path);
    assert.equal(file.length, 1001);
    assert.equal(file.path, path);
    assert.deepStrictEqual(Array.from(file.tokens.subarray(0, 5)), window(bytes, 0, 5, 0));
    assert.equal(data.TokenFile.openSync(path).length, 1001);
    const all = file.toTensor();
    assert.equal(all.dtype, "u16");
    assert.deepStrictEqual(Array.from(all.to("i32").toArray()), window(bytes, 0, 1001, 0));
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("getBatch draws nanoGPT's ix = randint(len - T, (B,)) and slices x, y from the bytes", async () => {
  const { path, bytes, dir } = writeTokens(5000);
  try {
    const file = await data.TokenFile.open(path);
    const [b, t] = [6, 32];
    manualSeed(1337);
    const ix = Array.from(randint(file.length - t, [b]).toArray());
    manualSeed(1337);
    const [x, y] = file.getBatch(b, t);
    assert.equal(x.dtype, "i32");
    assert.deepStrictEqual(x.shape, [b, t]);
    assert.deepStrictEqual(x.tolist(), ix.map((i) => window(bytes, i, t, 0)));
    assert.deepStrictEqual(y.tolist(), ix.map((i) => window(bytes, i, t, 1)));
    // Repeatable under manualSeed, and the next draw differs.
    const [x2] = file.getBatch(b, t);
    manualSeed(1337);
    const [x1] = file.getBatch(b, t);
    assert.deepStrictEqual(x1.toArray(), x.toArray());
    assert.notDeepStrictEqual(x2.toArray(), x.toArray());
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("getBatch reaches the last window (offset len - T - 1) and never past it", async () => {
  const { path, bytes, dir } = writeTokens(12);
  try {
    const file = await data.TokenFile.open(path);
    manualSeed(0);
    const seen = new Set<string>();
    for (let k = 0; k < 50; k++) {
      const [x, y] = file.getBatch(8, 10);
      for (const [r, row] of (x.tolist() as number[][]).entries()) {
        const i = [0, 1].find((o) => window(bytes, o, 10, 0).join() === row.join());
        assert.notEqual(i, undefined, `row ${row} is no window of the file`);
        assert.deepStrictEqual((y.tolist() as number[][])[r], window(bytes, i!, 10, 1));
        seen.add(String(i));
      }
    }
    assert.deepStrictEqual([...seen].sort(), ["0", "1"]);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("batchAt takes explicit offsets and refuses one whose window runs past the end", async () => {
  const { path, bytes, dir } = writeTokens(100);
  try {
    const file = await data.TokenFile.open(path);
    const [x, y] = file.batchAt([0, 50, 91], 8);
    assert.deepStrictEqual(x.tolist(), [0, 50, 91].map((i) => window(bytes, i, 8, 0)));
    assert.deepStrictEqual(y.tolist(), [0, 50, 91].map((i) => window(bytes, i, 8, 1)));
    assert.throws(
      () => file.batchAt([3, 92], 8),
      /batchAt: offset 92 \(row 1\) is not in \[0, 91\] \(the file holds 100 tokens; a row reads blockSize \+ 1 = 9\)/,
    );
    assert.throws(() => file.batchAt([-1], 8), /batchAt: offset -1/);
    assert.throws(() => file.batchAt([], 8), /batchAt: no offsets given/);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

deviceTest("getBatch puts x and y on the device it is given", async (device) => {
  const { path, bytes, dir } = writeTokens(300);
  try {
    const file = await data.TokenFile.open(path);
    const [x, y] = file.batchAt([5, 200], 16, { device });
    assert.equal(x.device, device);
    assert.equal(y.device, device);
    assert.deepStrictEqual(x.to("cpu").tolist(), [5, 200].map((i) => window(bytes, i, 16, 0)));
    assert.deepStrictEqual(y.to("cpu").tolist(), [5, 200].map((i) => window(bytes, i, 16, 1)));
    manualSeed(5);
    const [gx] = file.getBatch(4, 16, { device });
    manualSeed(5);
    assert.deepStrictEqual(gx.to("cpu").toArray(), file.getBatch(4, 16)[0].toArray());
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("TokenFile names the file: missing, odd byte length, too short for blockSize + 1", async () => {
  const dir = Deno.makeTempDirSync({ prefix: "dtrain_tokens_" });
  try {
    await assert.rejects(
      () => data.TokenFile.open(`${dir}/absent.bin`),
      new RegExp(`${dir}/absent.bin: cannot read it \\(no such file\\)`),
    );
    assert.throws(() => data.TokenFile.openSync(`${dir}/absent.bin`), /absent.bin: cannot read it/);
    Deno.writeFileSync(`${dir}/odd.bin`, new Uint8Array(7));
    await assert.rejects(
      () => data.TokenFile.open(`${dir}/odd.bin`),
      /odd.bin: 7 bytes is not a whole number of uint16 tokens/,
    );
    Deno.writeFileSync(`${dir}/short.bin`, new Uint8Array(20));
    const short = await data.TokenFile.open(`${dir}/short.bin`);
    assert.throws(
      () => short.getBatch(2, 10),
      /getBatch: .*short.bin holds 10 tokens, fewer than blockSize \+ 1 = 11/,
    );
    assert.equal(short.getBatch(2, 9)[0].shape[1], 9);
    assert.throws(
      () => short.getBatch(0, 4),
      /getBatch: batchSize must be a positive integer, got 0/,
    );
    assert.throws(() => short.getBatch(2, 2.5), /getBatch: blockSize must be a positive integer/);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("TokenFile names a path that is a directory or a FIFO, without reading it", async () => {
  const dir = Deno.makeTempDirSync({ prefix: "dtrain_tokens_" });
  try {
    // Was "IsADirectory: Is a directory (os error 21)" inside "cannot read it".
    Deno.mkdirSync(`${dir}/train.bin`);
    const directory = /train\.bin: is a directory, expected a file of tokens$/;
    await assert.rejects(() => data.TokenFile.open(`${dir}/train.bin`), directory);
    assert.throws(() => data.TokenFile.openSync(`${dir}/train.bin`), directory);
    // Read whole, a FIFO would wait for a writer forever.
    assert.ok((await new Deno.Command("mkfifo", { args: [`${dir}/val.bin`] }).output()).success);
    await assert.rejects(
      () => data.TokenFile.open(`${dir}/val.bin`),
      /val\.bin: is a FIFO, expected a file of tokens$/,
    );
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("with vocabSize, a batch holding a token outside the vocabulary is refused, naming the file, the token and its position", () => {
  const { path, bytes, dir } = writeTokens(200);
  try {
    // Token 50000 planted at position 150; everything else is below 50257, the file's range.
    new DataView(bytes.buffer).setUint16(300, 50000, true);
    Deno.writeFileSync(path, bytes);
    using file = data.TokenFile.openSync(path, { vocabSize: 50001 });
    const [x] = file.batchAt([0, 40], 8);
    assert.deepEqual(x.shape, [2, 8]);
    using strict = data.TokenFile.openSync(path, { vocabSize: 50000 });
    assert.throws(
      () => strict.batchAt([100, 145], 8),
      new RegExp(
        `^RangeError: ${path}: token 50000 at position 150 is outside the vocabulary of 50000`,
      ),
    );
    assert.throws(
      () => data.TokenFile.openSync(path, { vocabSize: 0 }),
      /vocabSize must be a positive integer, got 0/,
    );
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});
