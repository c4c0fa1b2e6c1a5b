/**
 * Comparisons, the bool dtype, i32 arithmetic and the in-place ops against PyTorch
 * (tests/fixtures/ops2.json `values`: outputs and their dtypes), and their bad inputs.
 * @module
 */

import assert from "node:assert/strict";
import { eq, gather, noGrad, randn, type Tensor, tensor, tidy, where } from "../../mod.ts";
import { assertClose, type FixtureTensor, fromFixture } from "../_harness/fixtures.ts";

interface ValueCase {
  name: string;
  op: string;
  args: Record<string, unknown>;
  inputs: Record<string, FixtureTensor>;
  outputs: { out: FixtureTensor };
}

type Inputs = Record<string, Tensor>;
type Args = Record<string, unknown>;
const operand = (x: Inputs, args: Args, key = "b") => x[key] ?? (args.scalar as number);
const binary =
  (name: "eq" | "ne" | "lt" | "le" | "gt" | "ge" | "add" | "sub" | "mul" | "div" | "floorDivide") =>
  (x: Inputs, args: Args) => x.a[name](operand(x, args));
const inPlace = (name: "add_" | "sub_" | "mul_" | "div_") => (x: Inputs, args: Args) => {
  const self = x.self.clone();
  if (name === "add_" || name === "sub_") {
    self[name](operand(x, args, "other"), (args.alpha as number) ?? 1);
  } else self[name](operand(x, args, "other"));
  return self;
};

/** How each fixture `op` runs in dtrain. */
const OPS: Record<string, (x: Inputs, args: Args) => Tensor> = {
  ...Object.fromEntries(
    (["eq", "ne", "lt", "le", "gt", "ge", "add", "sub", "mul", "div", "floorDivide"] as const).map((
      n,
    ) => [n, binary(n)]),
  ),
  sum: ({ a }, args) => a.sum(args.dim as number | undefined, args.keepdim as boolean | undefined),
  toF32: ({ a }) => a.float(),
  toBool: ({ a }) => a.mul(tensor([0, 1, 1, 0])).bool(),
  add_: inPlace("add_"),
  sub_: inPlace("sub_"),
  mul_: inPlace("mul_"),
  div_: inPlace("div_"),
  clamp_: ({ self }, args) =>
    self.clone().clamp_(
      (args.min ?? undefined) as number | undefined,
      (args.max ?? undefined) as number | undefined,
    ),
  copy_: ({ self, other }) => self.clone().copy_(other),
};

const cases = JSON.parse(
  Deno.readTextFileSync(new URL("../fixtures/ops2.json", import.meta.url)),
).values as ValueCase[];

Deno.test("ops2.json values: every op is mapped, names are unique", () => {
  assert.equal(new Set(cases.map((c) => c.name)).size, cases.length);
  assert.deepEqual([...new Set(cases.map((c) => c.op))].sort(), Object.keys(OPS).sort());
});

for (const c of cases) {
  Deno.test(`${c.op} matches PyTorch values and dtype: ${c.name}`, () => {
    tidy(() => {
      const inputs: Inputs = {};
      for (const [name, t] of Object.entries(c.inputs)) inputs[name] = fromFixture(t);
      const out = OPS[c.op](inputs, c.args);
      assert.equal(out.dtype, c.outputs.out.dtype, `${c.name}: dtype`);
      assertClose(out, c.outputs.out, `${c.name} output`, { rtol: 1e-6, atol: 1e-9 });
    });
  });
}

Deno.test("eq(pred, labels).sum() counts matches as an i32 scalar, with no toArray", () => {
  const logits = tensor([[0.1, 0.9], [0.8, 0.2], [0.3, 0.7]]);
  const labels = tensor([1, 1, 1], [3], { dtype: "i32" });
  const correct = eq(logits.argmax(-1), labels).sum();
  assert.equal(correct.dtype, "i32");
  assert.deepEqual(correct.shape, []);
  assert.equal(correct.item(), 2);
  assert.equal(correct.float().div(labels.numel()).item(), Math.fround(2 / 3));
});

Deno.test("bool tensors print, convert, sum and mask", () => {
  const m = tensor([1, 0, 3], [3]).gt(0);
  assert.equal(m.dtype, "bool");
  assert.equal(m.storage.nbytes, 3, "one byte a element");
  assert.equal(String(m), "tensor([ True, False,  True])");
  assert.deepEqual(m.to("i32").toArray(), Int32Array.of(1, 0, 1));
  assert.deepEqual(m.tolist(), [1, 0, 1]);
  assert.equal(m.sum().item(), 2);
  const v = tensor([1, 2, 3, 4]).gt(2).unsqueeze(0).expand(2, 4);
  assert.deepEqual(v.contiguous().toArray(), Uint8Array.of(0, 0, 1, 1, 0, 0, 1, 1));
  assert.deepEqual(tensor([5, 6, 7]).maskedFill(m, 0).toArray(), Float32Array.of(0, 6, 0));
});

Deno.test("gradients flow to the f32 operand of mixed i32 / f32 arithmetic", () => {
  const w = tensor([1, 2], [2], { requiresGrad: true });
  const k = tensor([3, 4], [2], { dtype: "i32" });
  w.mul(k).sum().backward();
  assert.deepEqual(w.grad!.toArray(), Float32Array.of(3, 4));
});

Deno.test("the in-place ops refuse what PyTorch refuses, naming what they saw", () => {
  const f = tensor([1, 2, 3]);
  const i = tensor([1, 2, 3], [3], { dtype: "i32" });
  const cases: [() => unknown, RegExp][] = [
    [
      () => i.clone().div_(2),
      /div_: the result is f32 and cannot be written into an i32 tensor \(operand 2, true division\)/,
    ],
    [
      () => i.clone().add_(0.5),
      /add_: the result is f32 and cannot be written into an i32 tensor \(operand 0.5\)/,
    ],
    [
      () => i.clone().mul_(f),
      /mul_: the result is f32 and cannot be written into an i32 tensor \(operand f32\)/,
    ],
    [
      () => f.clone().add_(tensor([1, 2])),
      /add_: shapes \[3\] and \[2\] cannot be broadcast together/,
    ],
    [
      () => f.clone().mul_(tensor([[1], [2]])),
      /mul_: the operand \[2, 1\] does not broadcast to self's shape \[3\]/,
    ],
    [() => f.clone().clamp_(), /clamp_: at least one of 'min' or 'max' must be given/],
    [() => i.clone().clamp_(0, 1), /clamp_: expected an f32 tensor, got i32/],
    [() => f.gt(1).add_(1), /add_: bool tensors have no in-place arithmetic/],
    [
      () => tensor([1], [1], { requiresGrad: true }).mul_(2),
      /mul_: a tensor that requires grad is used in an in-place operation/,
    ],
    [
      () => f.clone().copy_(tensor([1, 2])),
      /copy_: source f32 \[2\] does not match f32 \[3\]/,
    ],
    [() => i.floorDivide(0), /integer division by zero/],
    [() => f.floorDivide(2), /floorDivide: expected i32 operands, got f32 \[3\] and the number 2/],
    [() => f.gt(0).add(f.gt(0)), /add: arithmetic on two bool tensors is not supported/],
    [() => f.eq("1" as unknown as number), /eq: other must be a tensor or a number, got string/],
    [() => f.lt(tensor([1, 2])), /lt: shapes \[3\] and \[2\] cannot be broadcast together/],
  ];
  for (const [fn, message] of cases) assert.throws(fn, message);
  // Under noGrad the same write is allowed, as in PyTorch.
  const p = tensor([1, 2], [2], { requiresGrad: true });
  noGrad(() => p.sub_(tensor([1, 1]), 0.5));
  assert.deepEqual(p.toArray(), Float32Array.of(0.5, 1.5));
});

Deno.test("comparisons, where and gather split big tensors across threads and agree with a loop", () => {
  tidy(() => {
    const x = randn([300, 1000]);
    const values = x.toArray() as Float32Array;
    const positive = x.gt(0);
    const expected = Uint8Array.from(values, (v) => (v > 0 ? 1 : 0));
    assert.deepEqual(positive.toArray(), expected);
    const w = x.clone().requiresGrad_();
    const relu = where(positive, w, 0);
    assert.deepEqual(relu.toArray(), Float32Array.from(values, (v) => (v > 0 ? v : 0)));
    relu.sum().backward();
    assert.deepEqual(w.grad!.toArray(), Float32Array.from(expected));
    const index = tensor(Int32Array.from({ length: 300 * 1000 }, (_, i) => (i * 7) % 1000), [
      300,
      1000,
    ]);
    const picked = gather(x, 1, index).toArray();
    for (let i = 0; i < picked.length; i += 997) {
      assert.equal(picked[i], values[Math.floor(i / 1000) * 1000 + ((i * 7) % 1000)]);
    }
  });
});
