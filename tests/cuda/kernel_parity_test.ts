// The elementwise kernels of the CUDA library that tests/tensor/ops_cuda_test.ts leaves out, each
// reached through the public API with the same inputs on cpu and on each accelerator: clamp, abs,
// maximum and minimum, max and min (over everything and along a dimension), the comparisons, i32
// arithmetic, the casts and fills of i32 and bool, their sums, rand, and the squared norm behind
// clipGradNorm. i32 and bool results are bit-identical to the cpu's, f32 results and gradients
// within relative error 1e-5 (tests/cuda/_parity.ts). Their indexing counterparts are in
// indexing_parity_test.ts.
import assert from "node:assert/strict";
import {
  eq,
  full,
  ge,
  gt,
  le,
  lt,
  manualSeed,
  maximum,
  minimum,
  ne,
  nn,
  rand,
  randn,
  tensor,
  zeros,
} from "../../mod.ts";
import { deviceTest } from "../_harness/devices.ts";
import { assertCloseF32, assertReportedAtRead, F32_TOL, parity } from "./_parity.ts";

const i32 = (values: number[], shape = [values.length]) => tensor(values, shape, { dtype: "i32" });
const f32 = (values: number[], shape = [values.length]) => tensor(values, shape);

// ---------------------------------------------------------------- clamp and abs

parity(
  "clamp with both bounds, one bound and lo > hi, on negative values, NaN and at the bounds",
  () => [f32([-3, -1, -0.5, 0, 0.5, 1, 2.5, NaN, 1.5, -1, -Infinity, 7], [2, 6])],
  (x) => [x.clamp(-1, 1), x.clamp(-0.5), x.clamp(null, -0.5), x.clamp(1, -1)],
);
parity(
  "clamp of a strided view and of an empty tensor",
  () => [randn([4, 6]), zeros([0, 3])],
  (x, empty) => [x.transpose(0, 1).clamp(-0.3, 0.4), empty.clamp(0, 1)],
);
parity("clamp_ in place keeps NaN and honours a missing bound", () => [
  f32([-4, NaN, 0.25, 9, -Infinity, Infinity, -0.75]),
], (x) => [x.detach().clone().clamp_(-1, 1), x.detach().clone().clamp_(undefined, 0.5)]);
parity("abs of negative, zero and positive values (sign(0) = 0 in the gradient)", () => [
  f32([-2.5, -0, 0, 1e-30, -1e-30, 3, -7, 0.5], [2, 4]),
  zeros([0]),
], (x, empty) => [x.abs(), empty.abs()]);

// ---------------------------------------------------------------- maximum, minimum, max, min

parity("maximum and minimum with ties halving the gradient", () => [
  f32([1, 2, 3, -4, 5, 0, -1, 2]),
  f32([1, -2, 3, -5, 5, 0, 1, 3]),
], (a, b) => [maximum(a, b), minimum(a, b)]);
parity(
  "maximum and minimum broadcasting a row and a scalar against a matrix",
  () => [randn([3, 5]), randn([5]), f32([0.1], [])],
  (a, row, s) => [a.maximum(row), a.minimum(s), maximum(a.t(), s), minimum(row, a)],
);
parity("maximum and minimum of empty tensors", () => [zeros([0, 4]), zeros([4])], (a, b) => [
  maximum(a, b),
  minimum(b, a),
]);
parity("max() and min() share the gradient between tied extremes", () => [
  f32([3, -1, 3, 0, -1, 2, 3, -1], [2, 4]),
], (x) => [x.max(), x.min()]);
parity("max and min along each dimension: the first index on ties, keepdim", () => [
  f32([1, 5, 5, -2, 0, 7, 7, 7, -3, -3, 2, 2], [2, 2, 3]),
], (x) => {
  const a = x.max(2), b = x.min(1, true), c = x.max(0), d = x.min(-1);
  return [a.values, a.indices, b.values, b.indices, c.values, c.indices, d.values, d.indices];
});
parity("max and min of rows longer than a block: ties across threads, NaN first", () => {
  const rows = randn([4, 1000]).toArray() as Float32Array;
  for (const at of [700, 300, 900]) rows[at] = 9; // the first tie is not the first thread's
  for (const at of [1000 + 800, 1000 + 520]) rows[at] = NaN;
  for (const at of [2000 + 999, 2000 + 3]) rows[at] = -9;
  return [tensor(rows, [4, 1000])];
}, (x) => {
  const hi = x.max(1), lo = x.min(-1);
  return [hi.values, hi.indices, lo.values, lo.indices, x.narrow(0, 2, 2).min()];
});
parity("max() and min() of a tensor holding NaN share the gradient between the NaNs", () => [
  tensor([1, NaN, 3, NaN, -2, 3]),
], (x) => [x.max(), x.min(), x.max(0).indices]);

// ---------------------------------------------------------------- comparisons

parity(
  "the six comparisons of f32, with broadcasting, numbers, NaN and signed zeros",
  () => [
    f32([1, NaN, -0, 0, 2, -3, Infinity, 1], [2, 4]),
    f32([1, 1, 0, -0]),
  ],
  (a, b) => {
    const column = b.reshape([4, 1]);
    return [eq(a, b), ne(a, b), lt(a, b), le(a, 1), gt(a, -0), ge(column, a.unsqueeze(1))];
  },
);
parity("the comparisons of i32 and bool, and of i32 with a fraction", () => [
  i32([-2, 0, 3, 7, 2147483647, -2147483648], [2, 3]),
  i32([3, 0, -2]),
], (a, b) => {
  const m = a.gt(0), n = b.ge(0);
  return [
    a.eq(b),
    a.lt(b),
    a.ge(3),
    a.gt(2.5),
    m.eq(n),
    m.ne(n.reshape([1, 3])),
    m.le(1),
    m.lt(0.5),
  ];
});
parity("comparisons of empty tensors", () => [zeros([0, 3]), zeros([3])], (a, b) => [
  a.lt(b),
  a.eq(0),
]);

// ---------------------------------------------------------------- integer arithmetic

parity("i32 add, sub, mul wrap around; floorDivide rounds toward -infinity", () => [
  i32([7, -7, 7, -7, 2147483647, -2147483648, 0, 5], [2, 4]),
  i32([2, 2, -2, -2, 1, -1, 3, -1], [2, 4]),
  i32([1, -1, 1, -1]),
], (a, b, row) => [
  a.add(b),
  a.sub(b),
  a.mul(b),
  a.floorDivide(b),
  a.mul(65536),
  a.add(row),
  row.sub(a),
  a.floorDivide(row),
  a.floorDivide(-3),
]);
parity("i32 arithmetic with bool operands and in place", () => [
  i32([4, -9, 12, 0, 5, -1]),
  i32([1, 2, 3]),
], (a, b) => {
  const m = a.gt(0), c = a.add(0).reshape([2, 3]);
  c.sub_(b);
  return [a.add(m), m.mul(3), a.floorDivide(a.mul(a).add(1)), c];
});
deviceTest(
  "an i32 division by zero fails on cpu at once and on the accelerator at the next read, once",
  (device, api) => {
    const a = i32([7, 8, 9]), b = i32([1, 0, 2]);
    assertReportedAtRead(
      device,
      (d) => api.synchronize(d),
      (on) => a.to(on).floorDivide(b.to(on)),
      /integer division by zero \(element 1\b/,
    );
    // The device computes on afterwards.
    assert.deepEqual(a.to(device).floorDivide(2).toArray(), Int32Array.of(3, 4, 4));
  },
);

// ---------------------------------------------------------------- casts, fills, integer sums

parity(
  "casts between f32, i32 and bool: truncation, saturation, NaN to 0",
  () => [
    f32([2.9, -2.9, 0.5, -0, NaN, 3e9, -3e9, 2147483520]),
    i32([0, 1, -5, 2147483647]),
  ],
  (x, k) => [x.int(), x.to("bool"), k.to("bool"), x.to("bool").float(), k.bool().int(), k.float()],
);
// `like` only says where: the tensors are made on its device.
parity("full and fill_ of i32 and bool", () => [zeros([1])], (like) => {
  const device = like.device;
  return [
    full([5, 3], -123456, { dtype: "i32", device }),
    full([4], 1, { dtype: "bool", device }),
    full([4], 1, { dtype: "bool", device }).fill_(0),
    zeros([3], { dtype: "i32", device }).fill_(7),
    full([0], 1, { dtype: "bool", device }),
  ];
});
parity("sums of i32 and bool over everything and each dimension, saturating", () => [
  i32([2147483647, 1, -3, 4, 5, -2147483648, 7, 8, 9, 10, 11, 12], [2, 2, 3]),
], (a) => {
  const m = a.gt(4);
  return [a.sum(), a.sum(0), a.sum(1, true), a.sum(-1), m.sum(), m.sum(2), a.sum([0, 2])];
});
parity(
  "sums of empty i32 and bool tensors are zero",
  () => [zeros([0, 3], { dtype: "i32" })],
  (a) => [a.sum(0), a.sum(), a.bool().sum(1)],
);

// ---------------------------------------------------------------- rand and the squared norm

deviceTest("rand with a range draws the cpu's numbers on the accelerator", (device) => {
  for (const [shape, low, high] of [[[1001], -2, 3], [[3, 4], 0, 1], [[0], 0, 1]] as const) {
    manualSeed(21);
    const onDevice = rand(shape, { low, high, device }).toArray();
    manualSeed(21);
    assertCloseF32(onDevice, rand(shape, { low, high }).toArray(), `rand ${shape}`);
  }
});
deviceTest("clipGradNorm computes the cpu's norm and scales by it", (device) => {
  const clipped: { norm: number; grads: Float32Array[] }[] = [];
  for (const on of ["cpu", device]) {
    manualSeed(3);
    const model = new nn.Sequential(new nn.Linear(30, 40), new nn.Linear(40, 3)).to(on);
    manualSeed(4);
    model.forward(randn([16, 30]).to(on)).pow(2).sum().backward();
    const norm = nn.utils.clipGradNorm(model.parameters(), 0.5);
    clipped.push({ norm, grads: model.parameters().map((p) => p.grad!.toArray() as Float32Array) });
  }
  const [cpu, gpu] = clipped;
  assert.ok(Math.abs(gpu.norm - cpu.norm) <= F32_TOL * cpu.norm, `${gpu.norm} vs ${cpu.norm}`);
  cpu.grads.forEach((g, i) => assertCloseF32(gpu.grads[i], g, `gradient ${i} after clipping`));
});
