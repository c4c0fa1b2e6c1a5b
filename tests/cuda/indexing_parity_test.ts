// The indexing kernels of the CUDA library that tests/tensor/ops_cuda_test.ts leaves out, each
// reached through the public API with the same inputs on cpu and on each accelerator: gather and
// its scatter-add, indexSelect and its index-add, cat and stack (the block copy), where and
// maskedFill, tril and triu, the views whose gradients are written into a strided place (narrow,
// select, split, chunk), and the row gathers of the datasets. Indices repeat, operands broadcast,
// tensors are empty; an index out of range fails on cpu at once and on an accelerator at the next
// read. The elementwise counterparts are in kernel_parity_test.ts.
import assert from "node:assert/strict";
import {
  cat,
  data,
  gather,
  getDevice,
  indexSelect,
  maskedFill,
  randn,
  stack,
  Tensor,
  tensor,
  tril,
  triu,
  where,
  zeros,
} from "../../mod.ts";
import { deviceTest } from "../_harness/devices.ts";
import { assertCloseF32, assertReportedAtRead, parity } from "./_parity.ts";

const i32 = (values: number[], shape = [values.length]) => tensor(values, shape, { dtype: "i32" });

// ---------------------------------------------------------------- gather and indexSelect

parity("gather along each dimension, indices repeating (their gradients add up)", () => [
  randn([3, 4, 5]),
  i32([0, 3, 3, 1, 3, 0, 2, 2, 3, 3, 1, 0], [2, 3, 2]),
  i32([2, 0, 2, 1, 1, 1, 0, 2], [1, 2, 4]),
], (x, along1, along0) => [
  gather(x, 1, along1),
  x.gather(0, along0),
  x.gather(-1, along1.add(1)),
]);
parity("gather of i32 values, of one element, and with an empty index", () => [
  i32([5, -6, 7, -8, 9, -10], [2, 3]),
  i32([2, 0, 0, 1], [2, 2]),
  randn([4, 3]),
], (k, index, x) => [
  k.gather(1, index),
  x.gather(0, i32([3], [1, 1]).to(x.device)),
  x.gather(1, zeros([4, 0], { dtype: "i32", device: x.device })),
]);
parity("indexSelect along each dimension, indices repeating (their gradients add up)", () => [
  randn([4, 3, 5]),
  i32([3, 0, 3, 3, 1]),
  i32([2, 0, 2, 1]),
], (x, index, columns) => [
  x.indexSelect(0, index),
  indexSelect(x, 1, columns),
  x.indexSelect(-1, index.add(1)),
]);
parity("indexSelect of i32 values, with a 0-d index and with an empty one", () => [
  i32([1, -2, 3, -4, 5, -6], [3, 2]),
  randn([3, 2]),
], (k, x) => [
  k.indexSelect(0, i32([2, 2, 0]).to(k.device)),
  x.indexSelect(1, tensor(1, [], { dtype: "i32", device: x.device })),
  x.indexSelect(0, zeros([0], { dtype: "i32", device: x.device })),
]);
deviceTest(
  "an index out of range fails on cpu at once and on the accelerator at the next read",
  (device, api) => {
    const x = randn([4, 3]);
    const sync = (d: string) => api.synchronize(d);
    for (const bad of [9, -1]) {
      const message = new RegExp(`index ${bad} at position 1 is out of range`);
      const index = i32([0, bad, 2]), row = index.reshape([1, 3]);
      assertReportedAtRead(device, sync, (on) => x.to(on).indexSelect(0, index.to(on)), message);
      assertReportedAtRead(device, sync, (on) => x.to(on).gather(0, row.to(on)), message);
    }
    // The device computes on afterwards.
    assert.deepEqual(x.to(device).indexSelect(0, i32([1]).to(device)).shape, [1, 3]);
  },
);

// ---------------------------------------------------------------- cat and stack

parity("cat along each dimension, an empty entry among them", () => [
  randn([2, 3, 4]),
  randn([2, 1, 4]),
  zeros([2, 0, 4]),
  randn([2, 3, 2]),
], (a, b, empty, c) => [
  cat([a, b, empty, a], 1),
  cat([a, a.mul(2)], 0),
  cat([a, c], -1),
  cat([empty, empty], 2),
]);
parity("cat of i32 and bool (1-byte rows), and stack at each place", () => [
  i32([1, 2, 3, 4, 5, 6], [2, 3]),
  randn([2, 3]),
], (k, x) => [
  cat([k, k.mul(-1)], 1),
  cat([k.gt(2), k.lt(5), k.eq(3)], 0),
  stack([x, x.exp(), x], 0),
  stack([x, x.mul(3)], 2),
  stack([k, k], 1),
]);

// ---------------------------------------------------------------- where and maskedFill

parity("where with a condition repeating, expanded or whole, and numbers for a side", () => [
  randn([3, 4]),
  randn([4]),
  tensor([1, 0, 0, 1], [4]),
  tensor([0, 1, 1], [3, 1]),
], (x, y, rowFlags, columnFlags) => {
  const row = rowFlags.to("bool"), column = columnFlags.to("bool");
  return [
    where(row, x, y),
    where(column, y, x),
    where(x.gt(0), x, 0.5),
    where(x.lt(0), -1, y),
    where(row, 2, -3),
  ];
});
parity("where of i32 values, maskedFill, and empty operands", () => [
  i32([4, -5, 6, -7, 8, -9], [2, 3]),
  randn([2, 3]),
  zeros([0, 3]),
], (k, x, empty) => [
  where(k.gt(0), k, k.mul(10)),
  where(k.gt(0), k, 7),
  maskedFill(x, k.lt(0), -Infinity),
  x.maskedFill(k.gt(5).reshape([2, 3]), 1.5),
  where(empty.gt(0), empty, 1),
]);

// ---------------------------------------------------------------- tril and triu

parity("tril and triu at several diagonals, batched, of wide and tall matrices", () => [
  randn([2, 3, 5]),
  randn([5, 2]),
], (wide, tall) => [
  wide.tril(),
  wide.triu(),
  tril(wide, -1),
  triu(wide, 2),
  tall.tril(1),
  tall.triu(-3),
  wide.tril(-9),
]);
parity("tril and triu of i32 values and of empty batches", () => [
  i32([1, 2, 3, 4, 5, 6, 7, 8, 9], [3, 3]),
  zeros([2, 0, 3]),
], (k, empty) => [k.tril(), k.triu(1), empty.tril(), empty.triu()]);

// ---------------------------------------------------------------- gradients of views

parity("narrow, select, split and chunk put their gradients back in place", () => [
  randn([3, 5, 4]),
], (x) => [
  x.narrow(1, 1, 3),
  x.select(2, 3),
  x.select(0, -1).narrow(1, 1, 2),
  x.select(0, 1).select(0, 2).select(0, 3), // down to a 0-d view: one element, no dimensions
  x.to("bf16").narrow(2, 1, 2), // 2-byte elements
  ...x.split([2, 0, 3], 1),
  ...x.chunk(2, 2),
]);

// ---------------------------------------------------------------- the datasets' row gathers

parity("TensorDataset batches of f32, i32 and bool rows on the device", () => [
  randn([6, 2, 3]),
  i32([0, 1, 2, 3, 4, 5]),
  tensor([1, 0, 0, 1, 1, 0], [6, 1]),
], (x, y, flags) => {
  const set = new data.TensorDataset(x.detach(), y, flags.to("bool"));
  return [
    ...set.getBatch(Int32Array.of(5, 0, 5, 2)),
    ...set.getBatch(Int32Array.of(3)),
    ...set.getBatch(new Int32Array(0)),
  ];
});
deviceTest("TensorDataset refuses a row out of range on every device", (device, api) => {
  const set = (on: string) => new data.TensorDataset(tensor([1, 2, 3, 4], [4, 1]).to(on));
  for (const on of ["cpu", device]) {
    // A host-side check: cpu and cuda refuse at the call, emu at its next read.
    assert.throws(
      () => set(on).getBatch(Int32Array.of(0, 4))[0].toArray(),
      /gather: index 4 out of range \[0, 4\)/,
    );
  }
  api.synchronize(device);
});

/** `n` indices spread over `rows`, repeating. */
const spread = (n: number, rows: number) =>
  Int32Array.from({ length: n }, (_, i) => (i * 7) % rows);

// FashionMNIST gathers its u8 images and labels with dt_gather_u8_f32 and dt_gather_u8_i32 into
// cpu tensors only: no public path sends them to a device. They are reached here through the
// device's kernel table, the seam FashionMNIST calls (getDevice(...).kernels), with batches that
// need several of the CUDA library's staging blocks (8 MiB each).
deviceTest("the u8 dataset gathers write the cpu's rows on the device", (device, api) => {
  const rows = 10, rowLen = 16_384, src = new Uint8Array(rows * rowLen);
  for (let i = 0; i < src.length; i++) src[i] = (i * 31 + (i >> 8)) & 255;
  const at = (a: Uint8Array | Int32Array) => Deno.UnsafePointer.of(a);
  /** Rows `indices` of src on `on` as FashionMNIST scales them (here x / 255 - 0.5). */
  const images = (on: string, indices: Int32Array) => {
    const dev = getDevice(on), x = Tensor.empty([indices.length, rowLen], "f32", false, on);
    const n = indices.length;
    dev.check(dev.kernels.gatherU8F32(at(src), rows, at(indices), n, rowLen, 1 / 255, -0.5, x.ptr));
    return x.toArray();
  };
  /** Bytes `indices` of src on `on` as i32 labels. */
  const labels = (on: string, indices: Int32Array) => {
    const dev = getDevice(on), y = Tensor.empty([indices.length], "i32", false, on);
    dev.check(dev.kernels.gatherU8I32(at(src), src.length, at(indices), indices.length, y.ptr));
    return y.toArray();
  };
  const batch = spread(130, rows), many = spread((8 << 20) / 4 + 1000, src.length);
  assertCloseF32(images(device, batch), images("cpu", batch), "gatherU8F32");
  assert.deepEqual(labels(device, many), labels("cpu", many), "gatherU8I32");
  for (const on of ["cpu", device]) {
    // A host-side check: cpu and cuda refuse at the call, emu at its next read.
    const bad = Int32Array.of(1, rows);
    assert.throws(() => images(on, bad), /gather: index 10 out of range \[0, 10\)/);
  }
  api.synchronize(device);
});
deviceTest("TensorDataset gathers more rows than one staging block of indices holds", (device) => {
  const column = i32(Array.from({ length: 5000 }, (_, i) => i * 3 - 7000));
  const indices = spread((8 << 20) / 4 + 1000, 5000);
  const batch = (on: string) => new data.TensorDataset(column.to(on)).getBatch(indices)[0];
  assert.deepEqual(batch(device).toArray(), batch("cpu").toArray());
});
