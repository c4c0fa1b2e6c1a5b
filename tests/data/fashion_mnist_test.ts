// Fashion-MNIST and the IDX reader: the real Debian files when installed, and small IDX files
// written here (valid, truncated, bad magic, mismatched counts, missing, not gzip).
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import {
  DataLoader,
  FASHION_MNIST_ROOT,
  FashionMNIST,
  IDX_IMAGES,
  parseIdx,
} from "../../src/data/mod.ts";

const noDataset = !existsSync(join(FASHION_MNIST_ROOT, "train-images-idx3-ubyte.gz"));

/** An IDX file: magic, big-endian dimensions, then `data`. */
function idx(magic: number, dims: number[], data: Uint8Array): Uint8Array {
  const out = new Uint8Array(4 + 4 * dims.length + data.length);
  const view = new DataView(out.buffer);
  view.setUint32(0, magic);
  dims.forEach((d, i) => view.setUint32(4 + 4 * i, d));
  out.set(data, 4 + 4 * dims.length);
  return out;
}

/** Pixels of `count` 28x28 images where pixel p of image i is (i * 7 + p) % 256. */
function pixels(count: number): Uint8Array {
  return Uint8Array.from(
    { length: count * 784 },
    (_, k) => (Math.floor(k / 784) * 7 + k % 784) % 256,
  );
}

/**
 * A byte scaled to [0, 1] as the gather kernel does it: times f32(1/255), rounded to f32. This is
 * within one ulp of torchvision's `x / 255`.
 */
function toUnit(byte: number): number {
  const scaled = Math.fround(byte * Math.fround(1 / 255));
  assert.ok(Math.abs(scaled - byte / 255) <= 1e-7);
  return scaled;
}

/** Writes a split ("t10k") into a new temporary folder; `files` overrides either file's bytes. */
function writeSplit(
  count: number,
  files: { images?: Uint8Array; labels?: Uint8Array } = {},
): string {
  const root = Deno.makeTempDirSync({ prefix: "dtrain_fmnist_" });
  const labels = Uint8Array.from({ length: count }, (_, i) => (i * 3) % 10);
  Deno.writeFileSync(
    join(root, "t10k-images-idx3-ubyte.gz"),
    files.images ?? gzipSync(idx(0x803, [count, 28, 28], pixels(count))),
  );
  Deno.writeFileSync(
    join(root, "t10k-labels-idx1-ubyte.gz"),
    files.labels ?? gzipSync(idx(0x801, [count], labels)),
  );
  return root;
}

/** Asserts that opening the test split under `root` fails naming `file` and the package. */
function assertRefused(root: string, file: string, reason: RegExp): void {
  try {
    assert.throws(() => new FashionMNIST({ root, train: false }), (e: Error) => {
      assert.ok(e.message.includes(join(root, file)), e.message);
      assert.ok(e.message.includes("apt-get install dataset-fashion-mnist"), e.message);
      assert.match(e.message, reason);
      return true;
    });
  } finally {
    Deno.removeSync(root, { recursive: true });
  }
}

Deno.test({
  name: "FashionMNIST reads Debian's train (60000) and test (10000) splits with their labels",
  ignore: noDataset,
  fn() {
    const train = new FashionMNIST();
    assert.equal(train.length, 60000);
    assert.equal(train.images.length, 60000 * 784);
    assert.deepEqual([...train.labels.subarray(0, 10)], [9, 0, 0, 3, 0, 2, 7, 2, 5, 5]);
    let min = 255, max = 0, sum = 0;
    for (const p of train.images) {
      min = Math.min(min, p);
      max = Math.max(max, p);
      sum += p;
    }
    assert.deepEqual([min, max], [0, 255]);
    // The published training-set mean of Fashion-MNIST's pixels, scaled to [0, 1].
    assert.ok(Math.abs(sum / train.images.length / 255 - 0.2860) < 1e-4);
    const counts = new Array(10).fill(0);
    for (const label of train.labels) counts[label]++;
    assert.deepEqual(counts, new Array(10).fill(6000));

    const test = new FashionMNIST({ train: false });
    assert.equal(test.length, 10000);
    assert.deepEqual([...test.labels.subarray(0, 10)], [9, 2, 1, 1, 6, 1, 4, 6, 5, 7]);
  },
});

Deno.test({
  name: "FashionMNIST batches are f32 [B, 784] in [0, 1] and i32 [B], equal to get() and the bytes",
  ignore: noDataset,
  fn() {
    const test = new FashionMNIST({ train: false });
    const indices = Int32Array.of(0, 9999, 17);
    const [x, y] = test.getBatch(indices);
    assert.deepEqual([x.shape, x.dtype, y.shape, y.dtype], [[3, 784], "f32", [3], "i32"]);
    const xs = x.toArray(), ys = y.toArray();
    indices.forEach((index, b) => {
      for (let p = 0; p < 784; p++) {
        assert.equal(xs[b * 784 + p], toUnit(test.images[index * 784 + p]));
      }
      assert.equal(ys[b], test.labels[index]);
      const [image, label] = test.get(index);
      assert.deepEqual([image.shape, label.shape, label.dtype], [[784], [], "i32"]);
      assert.deepEqual(image.toArray(), xs.subarray(b * 784, (b + 1) * 784));
      assert.equal(label.item(), test.labels[index]);
    });
    assert.ok(xs.every((v) => v >= 0 && v <= 1));
  },
});

Deno.test({
  name: "FashionMNIST normalize gives (x / 255 - mean) / std",
  ignore: noDataset,
  fn() {
    const normalize = { mean: 0.2860, std: 0.3530 };
    const test = new FashionMNIST({ train: false, normalize });
    const [image] = test.get(3);
    const values = image.toArray();
    for (let p = 0; p < 784; p++) {
      const expected = (test.images[3 * 784 + p] / 255 - normalize.mean) / normalize.std;
      assert.ok(Math.abs(values[p] - expected) < 1e-5, `pixel ${p}: ${values[p]} vs ${expected}`);
    }
    assert.throws(() => new FashionMNIST({ normalize: { mean: 0, std: 0 } }), /positive std/);
  },
});

Deno.test("FashionMNIST reads a small IDX split written to disk and batches it", () => {
  const root = writeSplit(5);
  try {
    const data = new FashionMNIST({ root, train: false });
    assert.equal(data.length, 5);
    assert.deepEqual([...data.labels], [0, 3, 6, 9, 2]);
    const [x, y] = new DataLoader(data, { batchSize: 4 })[Symbol.iterator]().next().value!;
    assert.deepEqual([x.shape, y.shape], [[4, 784], [4]]);
    assert.deepEqual([...y.toArray()], [0, 3, 6, 9]);
    const expected = pixels(5);
    const xs = x.toArray();
    for (let k = 0; k < 4 * 784; k++) assert.equal(xs[k], toUnit(expected[k]));
    assert.throws(() => data.get(5), /FashionMNIST: index 5 is out of range for 5 samples/);
  } finally {
    Deno.removeSync(root, { recursive: true });
  }
});

Deno.test("FashionMNIST refuses a missing file, naming it and the package", () => {
  const root = writeSplit(2);
  Deno.removeSync(join(root, "t10k-labels-idx1-ubyte.gz"));
  assertRefused(root, "t10k-labels-idx1-ubyte.gz", /file not found/);
});

Deno.test("FashionMNIST refuses a file that is not gzip", () => {
  const root = writeSplit(2, { images: idx(0x803, [2, 28, 28], pixels(2)) });
  assertRefused(root, "t10k-images-idx3-ubyte.gz", /not a valid gzip file/);
});

Deno.test("FashionMNIST refuses a truncated gzip stream", () => {
  const whole = gzipSync(idx(0x803, [2, 28, 28], pixels(2)));
  const root = writeSplit(2, { images: whole.subarray(0, whole.length - 40) });
  assertRefused(root, "t10k-images-idx3-ubyte.gz", /not a valid gzip file/);
});

Deno.test("FashionMNIST refuses an IDX file shorter than its dimensions promise", () => {
  const truncated = idx(0x803, [3, 28, 28], pixels(3)).subarray(0, 16 + 3 * 784 - 1);
  const root = writeSplit(3, { images: gzipSync(truncated) });
  assertRefused(
    root,
    "t10k-images-idx3-ubyte.gz",
    /truncated IDX file: dimensions \[3, 28, 28\] need 2352 bytes of data, found 2351/,
  );
});

Deno.test("FashionMNIST refuses a file with the wrong magic (labels where images belong)", () => {
  const root = writeSplit(2, { images: gzipSync(idx(0x801, [2], Uint8Array.of(1, 2))) });
  assertRefused(
    root,
    "t10k-images-idx3-ubyte.gz",
    /bad IDX magic 0x00000801, expected 0x00000803/,
  );
});

Deno.test("FashionMNIST refuses labels whose count differs from the images'", () => {
  const root = writeSplit(3, { labels: gzipSync(idx(0x801, [2], Uint8Array.of(1, 2))) });
  assertRefused(root, "t10k-labels-idx1-ubyte.gz", /holds 2 labels but .* holds 3 images/);
});

Deno.test("FashionMNIST refuses images that are not 28x28 and labels outside 0..9", () => {
  const small = gzipSync(idx(0x803, [2, 14, 14], new Uint8Array(2 * 196)));
  assertRefused(writeSplit(2, { images: small }), "t10k-images-idx3-ubyte.gz", /14x14/);
  const labels = gzipSync(idx(0x801, [2], Uint8Array.of(1, 10)));
  assertRefused(
    writeSplit(2, { labels }),
    "t10k-labels-idx1-ubyte.gz",
    /label 10 at index 1 is not in \[0, 10\)/,
  );
});

Deno.test("parseIdx reads big-endian dimensions and refuses headers and tails that do not fit", () => {
  const parsed = parseIdx(idx(0x803, [2, 1, 3], Uint8Array.of(1, 2, 3, 4, 5, 6)), IDX_IMAGES, "f");
  assert.deepEqual(parsed.dims, [2, 1, 3]);
  assert.deepEqual([...parsed.data], [1, 2, 3, 4, 5, 6]);
  assert.throws(() => parseIdx(Uint8Array.of(0, 0), IDX_IMAGES, "f"), /f: truncated IDX file \(2/);
  assert.throws(
    () => parseIdx(idx(0x803, [2], new Uint8Array(0)), IDX_IMAGES, "f"),
    /the header needs 16/,
  );
  assert.throws(
    () => parseIdx(idx(0x803, [1, 1, 2], Uint8Array.of(1, 2, 3)), IDX_IMAGES, "f"),
    /f: IDX file too long/,
  );
});
