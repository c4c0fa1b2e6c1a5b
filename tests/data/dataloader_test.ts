import assert from "node:assert/strict";
import { allocatedBytes, type Tensor, tensor } from "../../mod.ts";
import {
  DataLoader,
  type Dataset,
  DistributedSampler,
  SequentialSampler,
  TensorDataset,
} from "../../src/data/mod.ts";

/** Sample i is [x = [i, 10i, 100i] f32, y = i i32 scalar], built per call (no getBatch). */
function perSample(length: number): Dataset<[Tensor, Tensor]> {
  return {
    length,
    get: (i) => [tensor([i, 10 * i, 100 * i]), tensor([i], [], { dtype: "i32" })],
  };
}

/** The same samples as `perSample`, as a TensorDataset (native getBatch). */
function batched(length: number): TensorDataset {
  const x = Array.from({ length }, (_, i) => [i, 10 * i, 100 * i]);
  return new TensorDataset(
    tensor(x.length ? x : [], [length, 3]),
    tensor(Int32Array.from({ length }, (_, i) => i), [length]),
  );
}

/** The y values of one pass, batch by batch. */
function labels(loader: Iterable<Tensor[]>): number[][] {
  return [...loader].map(([, y]) => [...y.toArray()]);
}

Deno.test("DataLoader yields [B, ...] batches with a smaller last one, or drops it", () => {
  for (const data of [perSample(10), batched(10)]) {
    const loader = new DataLoader(data, { batchSize: 4 });
    assert.equal(loader.length, 3);
    const batches = [...loader];
    assert.deepEqual(batches.map(([x, y]) => [x.shape, y.shape]), [
      [[4, 3], [4]],
      [[4, 3], [4]],
      [[2, 3], [2]],
    ]);
    assert.deepEqual(batches.map(([x, y]) => [x.dtype, y.dtype])[0], ["f32", "i32"]);
    assert.deepEqual(labels(loader), [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]);
    const dropping = new DataLoader(data, { batchSize: 4, dropLast: true });
    assert.equal(dropping.length, 2);
    assert.deepEqual(labels(dropping), [[0, 1, 2, 3], [4, 5, 6, 7]]);
  }
  assert.equal(new DataLoader(perSample(8), { batchSize: 4, dropLast: true }).length, 2);
  assert.deepEqual(labels(new DataLoader(perSample(3))), [[0], [1], [2]]);
  assert.equal([...new DataLoader(perSample(0), { batchSize: 4 })].length, 0);
});

Deno.test("DataLoader stacking get() results equals the dataset's getBatch() collation", () => {
  const sampler = new DistributedSampler({ length: 23 }, { numReplicas: 2, rank: 1, seed: 4 });
  const stacked = [...new DataLoader(perSample(23), { batchSize: 5, sampler })];
  const gathered = [...new DataLoader(batched(23), { batchSize: 5, sampler })];
  assert.equal(stacked.length, 3);
  stacked.forEach((batch, b) => {
    batch.forEach((field, f) => {
      assert.deepEqual([field.shape, field.dtype], [gathered[b][f].shape, gathered[b][f].dtype]);
      assert.deepEqual(field.toArray(), gathered[b][f].toArray());
    });
  });
  // And each row equals the sample it came from.
  const [x, y] = stacked[0];
  const xs = x.toArray();
  [...y.toArray()].forEach((i, row) => {
    assert.deepEqual([...xs.subarray(3 * row, 3 * row + 3)], [i, 10 * i, 100 * i]);
  });
});

Deno.test("DataLoader shuffle visits every index once per epoch, reproducibly by seed", () => {
  const make = (seed: number) => new DataLoader(batched(50), { batchSize: 8, shuffle: true, seed });
  const a = make(1), b = make(1), c = make(2);
  const epochs: number[][] = [];
  for (let epoch = 0; epoch < 3; epoch++) {
    a.setEpoch(epoch);
    b.setEpoch(epoch);
    const order = labels(a).flat();
    assert.deepEqual([...order].sort((p, q) => p - q), Array.from({ length: 50 }, (_, i) => i));
    assert.deepEqual(labels(b).flat(), order, `epoch ${epoch}`);
    epochs.push(order);
  }
  assert.notDeepEqual(epochs[1], epochs[0]);
  assert.notDeepEqual(epochs[2], epochs[1]);
  c.setEpoch(0);
  assert.notDeepEqual(labels(c).flat(), epochs[0]);
  // Passes without setEpoch move on to the next epoch's order.
  const plain = make(1);
  assert.deepEqual([labels(plain).flat(), labels(plain).flat()], [epochs[0], epochs[1]]);
});

Deno.test("DataLoader with a DistributedSampler reads the rank's share and forwards setEpoch", () => {
  const sampler = new DistributedSampler({ length: 10 }, {
    numReplicas: 3,
    rank: 2,
    shuffle: false,
  });
  const loader = new DataLoader(batched(10), { batchSize: 3, sampler });
  assert.equal(loader.length, 2);
  assert.deepEqual(labels(loader), [[2, 5, 8], [1]]);
  loader.setEpoch(4);
  assert.equal(sampler.epoch, 4);
});

Deno.test("DataLoader batches can be disposed, leaving no native memory behind", () => {
  const data = perSample(20);
  const before = allocatedBytes();
  for (const batch of new DataLoader(data, { batchSize: 6 })) batch.forEach((t) => t.dispose());
  assert.equal(allocatedBytes(), before);
  const gathered = batched(20);
  const withData = allocatedBytes();
  for (const batch of new DataLoader(gathered, { batchSize: 6, shuffle: true })) {
    batch.forEach((t) => t.dispose());
  }
  assert.equal(allocatedBytes(), withData);
});

Deno.test("DataLoader leaves tensors the dataset stores alive and frees those get() makes", () => {
  const rows = Array.from(
    { length: 6 },
    (_, i) => [tensor([i, 10 * i]), tensor([i], [], { dtype: "i32" })],
  );
  const stored: Dataset<[Tensor, Tensor]> = { length: 6, get: (i) => [rows[i][0], rows[i][1]] };
  const loader = new DataLoader(stored, { batchSize: 4 });
  const before = allocatedBytes();
  for (let epoch = 0; epoch < 2; epoch++) {
    const seen = [];
    for (const [x, y] of loader) {
      seen.push([...y.toArray()]);
      x.dispose();
      y.dispose();
    }
    assert.deepEqual(seen, [[0, 1, 2, 3], [4, 5]], `epoch ${epoch}`);
  }
  assert.ok(rows.flat().every((t) => !t.disposed), "the dataset's tensors are intact");
  const fresh = new DataLoader(perSample(6), { batchSize: 4 });
  for (let epoch = 0; epoch < 2; epoch++) {
    for (const batch of fresh) batch.forEach((t) => t.dispose());
  }
  assert.equal(allocatedBytes(), before, "no per-sample tensor is left behind");
  rows.flat().forEach((t) => t.dispose());
});

Deno.test("DataLoader takes a dataset of single tensors and yields one-field batches", () => {
  const data: Dataset<Tensor> = { length: 3, get: (i) => tensor([i, i]) };
  const batches = [...new DataLoader(data, { batchSize: 2 })];
  assert.deepEqual(batches.map((b) => b.length), [1, 1]);
  assert.deepEqual([...batches[0][0].toArray()], [0, 0, 1, 1]);
});

Deno.test("DataLoader refuses samples of different shapes or field counts, naming the sample", () => {
  const ragged: Dataset<Tensor> = { length: 2, get: (i) => tensor(i === 0 ? [1, 2] : [1, 2, 3]) };
  assert.throws(
    () => [...new DataLoader(ragged, { batchSize: 2 })],
    /sample 1 field 0 is f32 \[3\], earlier samples were f32 \[2\]/,
  );
  const uneven: Dataset = {
    length: 2,
    get: (i) => i === 0 ? [tensor([1])] : [tensor([1]), tensor([2])],
  };
  assert.throws(() => [...new DataLoader(uneven, { batchSize: 2 })], /sample 1 has 2 fields/);
});

Deno.test("DataLoader refuses sampler with shuffle, and a batch size below 1", () => {
  const data = batched(4);
  assert.throws(
    () => new DataLoader(data, { sampler: new SequentialSampler(data), shuffle: true }),
    /mutually exclusive/,
  );
  assert.throws(() => new DataLoader(data, { batchSize: 0 }), /batchSize 0/);
});
