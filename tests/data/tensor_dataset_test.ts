import assert from "node:assert/strict";
import { arange, tensor } from "../../mod.ts";
import { TensorDataset } from "../../src/data/mod.ts";

Deno.test("TensorDataset get() returns row views and getBatch() gathers rows of every dtype", () => {
  const x = tensor([[1, 2], [3, 4], [5, 6]]);
  const y = tensor([7, 8, 9], [3], { dtype: "i32" });
  const data = new TensorDataset(x, y);
  assert.equal(data.length, 3);
  const [xi, yi] = data.get(2);
  assert.deepEqual([xi.shape, yi.shape, yi.dtype], [[2], [], "i32"]);
  assert.deepEqual([...xi.toArray()], [5, 6]);
  assert.equal(yi.item(), 9);
  const [xb, yb] = data.getBatch(Int32Array.of(2, 0, 2));
  assert.deepEqual(xb.shape, [3, 2]);
  assert.deepEqual([...xb.toArray()], [5, 6, 1, 2, 5, 6]);
  assert.deepEqual([...yb.toArray()], [9, 7, 9]);
  const [xe, ye] = data.getBatch(new Int32Array(0));
  assert.deepEqual([xe.shape, ye.shape], [[0, 2], [0]]);
});

Deno.test("TensorDataset refuses tensors whose first dimensions differ, naming both", () => {
  assert.throws(
    () => new TensorDataset(tensor([[1, 2], [3, 4]]), tensor([1, 2, 3])),
    /tensor 0 has 2 rows \[2, 2\], tensor 1 has 3 \[3\]/,
  );
  assert.throws(() => new TensorDataset(tensor(1, [])), /tensor 0 is a scalar/);
  assert.throws(() => new TensorDataset(), /at least one tensor/);
  assert.throws(() => new TensorDataset(tensor([1, 2])).get(2), /index 2 is out of range/);
});

Deno.test("TensorDataset gathers from a non-contiguous tensor as from its contiguous copy", () => {
  const base = arange(0, 6, 1, { dtype: "f32" }).reshape(2, 3);
  const data = new TensorDataset(base.t());
  assert.deepEqual([...data.getBatch(Int32Array.of(2, 0))[0].toArray()], [2, 5, 0, 3]);
  assert.deepEqual([...data.get(1)[0].toArray()], [1, 4]);
});

Deno.test("TensorDataset getBatch() reports an index out of range", () => {
  const data = new TensorDataset(tensor([1, 2, 3]));
  assert.throws(() => data.getBatch(Int32Array.of(0, 3)), /index 3 out of range \[0, 3\)/);
});
