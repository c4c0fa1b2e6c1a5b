// TextDataset on real files: Debian's fortunes corpus when installed, and files written here.
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { DataLoader, FORTUNES_ROOT, TextDataset } from "../../src/data/mod.ts";
import { tidy } from "../../src/tensor/scope.ts";

const noFortunes = !existsSync(join(FORTUNES_ROOT, "fortunes"));

Deno.test({
  name: "TextDataset.fortunes: train and val splits of the real corpus, next-byte targets",
  ignore: noFortunes,
  fn: () => {
    tidy(() => {
      const train = TextDataset.fortunes({ blockSize: 64 });
      const val = TextDataset.fortunes({ blockSize: 64, split: "val" });
      const total = train.bytes.length + val.bytes.length;
      assert.ok(total > 1_000_000, `the corpus has ${total} bytes`);
      assert.equal(val.bytes.length, total - Math.floor(total * 0.9));
      assert.equal(train.length, Math.floor((train.bytes.length - 65) / 64) + 1);
      // The split boundary: val starts where train ends, so they share no byte.
      const corpus = new Uint8Array(total);
      corpus.set(train.bytes);
      corpus.set(val.bytes, train.bytes.length);
      const first = Deno.readFileSync(join(FORTUNES_ROOT, "art"));
      assert.deepEqual(corpus.subarray(0, first.length), first, "files in name order, art first");
      for (const data of [train, val]) {
        const last = data.length - 1;
        const [x, y] = data.get(last);
        assert.deepEqual(x.shape, [64]);
        const xs = x.toArray(), ys = y.toArray();
        assert.deepEqual(Array.from(xs.subarray(1)), Array.from(ys.subarray(0, 63)));
        const start = last * 64;
        assert.deepEqual(Array.from(xs), Array.from(data.bytes.subarray(start, start + 64)));
        assert.equal(ys[63], data.bytes[start + 64]);
        assert.ok(data.bytes.length - (start + 65) < 64, "the last sample is the last full block");
      }
      const text = train.get(0)[0].toArray();
      assert.ok(text.every((b) => b === 9 || b === 10 || (b >= 32 && b < 127)), "plain ASCII text");
    });
  },
});

Deno.test("TextDataset.fromFiles: deterministic batches through the DataLoader, with a stride", () => {
  const dir = Deno.makeTempDirSync({ prefix: "dtrain-text-" });
  try {
    const a = join(dir, "a.txt"), b = join(dir, "b.txt");
    Deno.writeTextFileSync(a, "héllo, ");
    Deno.writeTextFileSync(b, "wörld! ".repeat(10));
    tidy(() => {
      const data = TextDataset.fromFiles([a, b], { blockSize: 8, stride: 3, valFraction: 0.25 });
      const corpus = new Uint8Array([...Deno.readFileSync(a), ...Deno.readFileSync(b)]);
      const cut = Math.floor(corpus.length * 0.75);
      assert.deepEqual(data.bytes, corpus.subarray(0, cut));
      assert.equal(data.length, Math.floor((cut - 9) / 3) + 1);
      const [x, y] = data.getBatch(Int32Array.of(2, 0));
      assert.deepEqual(x.shape, [2, 8]);
      assert.deepEqual(Array.from(x.toArray().subarray(0, 8)), Array.from(corpus.subarray(6, 14)));
      assert.deepEqual(Array.from(y.toArray().subarray(8)), Array.from(corpus.subarray(1, 9)));
      assert.equal(TextDataset.decode(TextDataset.encode("wörld")), "wörld");
      const epoch = (seed: number) =>
        [...new DataLoader(data, { batchSize: 4, shuffle: true, seed })].map(([xb]) =>
          Array.from(xb.toArray())
        );
      assert.deepEqual(epoch(5), epoch(5), "the same seed gives the same batches");
    });
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("TextDataset names bad options and unreadable files", () => {
  const bytes = new TextEncoder().encode("abcdefgh");
  assert.throws(
    () => new TextDataset(bytes, { blockSize: 0 }),
    /blockSize must be a positive integer, got 0/,
  );
  assert.throws(
    () => new TextDataset(bytes, { blockSize: 4, split: "test" as "val" }),
    /split must be "train" or "val", got "test"/,
  );
  assert.throws(
    () => new TextDataset(bytes, { blockSize: 4, valFraction: 1 }),
    /valFraction .* got 1/,
  );
  assert.throws(
    () => new TextDataset(bytes, { blockSize: 8, valFraction: 0 }),
    /the train split has 8 bytes, fewer than blockSize \+ 1 \(9\)/,
  );
  assert.throws(
    () => new TextDataset(bytes, { blockSize: 2 }).get(3),
    /index 3 is out of range for 3 samples/,
  );
  assert.throws(
    () => TextDataset.fromFiles(["/nonexistent/corpus.txt"], { blockSize: 4 }),
    /cannot read \/nonexistent\/corpus\.txt/,
  );
  assert.throws(
    () => TextDataset.fortunes({ blockSize: 4, root: "/nonexistent" }),
    /cannot list \/nonexistent; install it with `apt-get install fortunes`/,
  );
});
