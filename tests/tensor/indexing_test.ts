/**
 * The indexing, view and triangle ops against PyTorch (tests/fixtures/ops2.json `cases`: outputs
 * and the gradients of every f32 input within 1e-5 relative), their bad inputs, and the version
 * checks that refuse a backward after an in-place write.
 * @module
 */

import assert from "node:assert/strict";
import {
  allocatedBytes,
  cat,
  eq,
  gather,
  indexSelect,
  maskedFill,
  stack,
  type Tensor,
  tensor,
  tidy,
  where,
  zeros,
} from "../../mod.ts";
import {
  assertClose,
  type FixtureTensor,
  fromFixture,
  loadCases,
  type OpCase,
} from "../_harness/fixtures.ts";

type Inputs = Record<string, Tensor>;
type Args = Record<string, unknown>;

const list = (x: Inputs) => Object.keys(x).sort().map((k) => x[k]);
const mask = (args: Args, key: string) => fromFixture(args[key] as FixtureTensor);

/** How each fixture `op` runs in dtrain. */
const OPS: Record<string, (x: Inputs, args: Args) => Tensor> = {
  cat: (x, args) => cat(list(x), args.dim as number),
  stack: (x, args) => stack(list(x), args.dim as number),
  indexSelect: ({ x, index }, args) => indexSelect(x, args.dim as number, index),
  gather: ({ x, index }, args) => x.gather(args.dim as number, index),
  where: ({ x, y }, args) => where(mask(args, "cond"), x, y ?? (args.y as number)),
  maskedFill: ({ x }, args) => maskedFill(x, mask(args, "mask"), args.value as number),
  squeeze: ({ x }, args) => x.squeeze((args.dim ?? undefined) as number | number[] | undefined),
  unsqueeze: ({ x }, args) => x.unsqueeze(args.dim as number),
  permute: ({ x }, args) => x.permute(args.dims as number[]),
  tril: ({ x }, args) => x.tril(args.diagonal as number),
  triu: ({ x }, args) => x.triu(args.diagonal as number),
};

const cases = loadCases<OpCase>("ops2.json");

Deno.test("ops2.json cases cover every op once named, with unique names", () => {
  assert.equal(new Set(cases.map((c) => c.name)).size, cases.length);
  assert.deepEqual([...new Set(cases.map((c) => c.op))].sort(), Object.keys(OPS).sort());
});

for (const c of cases) {
  Deno.test(`${c.op} matches PyTorch forward and backward: ${c.name}`, () => {
    tidy(() => {
      const inputs: Inputs = {};
      for (const [name, t] of Object.entries(c.inputs)) {
        inputs[name] = fromFixture(t, t.dtype === "f32");
      }
      const out = OPS[c.op](inputs, c.args);
      assert.equal(out.dtype, c.outputs.out.dtype, `${c.name}: dtype`);
      assertClose(out, c.outputs.out, `${c.name} output`);
      out.backward(fromFixture(c.gradOutput));
      for (const [name, expected] of Object.entries(c.grads)) {
        const grad = inputs[name].grad;
        assert.ok(grad !== null, `${c.name}: input ${name} got no gradient`);
        assertClose(grad, expected, `${c.name} grad of ${name}`);
      }
    });
  });
}

Deno.test("squeeze, unsqueeze and permute are views of the same memory", () => {
  const x = zeros([2, 1, 3]);
  for (const v of [x.squeeze(), x.unsqueeze(0), x.permute(2, 0, 1)]) {
    assert.equal(v.storage, x.storage);
  }
  const p = tensor([[1, 2, 3], [4, 5, 6]]).permute(1, 0);
  assert.equal(p.isContiguous(), false);
  assert.deepEqual(p.strides, [1, 3]);
  assert.deepEqual(p.tolist(), [[1, 4], [2, 5], [3, 6]]);
});

Deno.test("cat and stack take i32 and bool tensors too", () => {
  const i = tensor([1, 2], [2], { dtype: "i32" });
  assert.deepEqual(cat([i, i]).toArray(), Int32Array.of(1, 2, 1, 2));
  const b = tensor([1, 0], [2], { dtype: "bool" });
  const s = stack([b, b], 1);
  assert.equal(s.dtype, "bool");
  assert.deepEqual(s.toArray(), Uint8Array.of(1, 1, 0, 0));
});

Deno.test("the ops refuse bad dims, shapes, dtypes and indices, naming what they saw", () => {
  const x = tensor([[1, 2, 3], [4, 5, 6]]);
  const idx = (values: number[], shape = [values.length]) =>
    tensor(values, shape, { dtype: "i32" });
  const cases: [() => unknown, RegExp][] = [
    [() => cat([]), /cat: expected a non-empty list/],
    [
      () => cat([x, zeros([2, 2])], 0),
      /cat: sizes must match except in dimension 0: entry 0 is \[2, 3\], entry 1 is \[2, 2\]/,
    ],
    [() => cat([x, x.to("i32")]), /cat: entry 1 is i32, entry 0 is f32/],
    [() => cat([x, x], 2), /cat: dimension 2 is out of range for a 2-d tensor/],
    [
      () => stack([x, zeros([3, 2])]),
      /stack: expects each tensor to be equal size, but got \[2, 3\] at entry 0 and \[3, 2\] at entry 1/,
    ],
    [() => stack([x], 3), /stack: dimension 3 is out of range for a 3-d tensor/],
    [
      () => indexSelect(x, 1, idx([0, 3])),
      /index 3 at position 1 is out of range for a dimension of size 3/,
    ],
    [() => indexSelect(x, 0, idx([0, -1])), /index -1 at position 1 is out of range/],
    [
      () => indexSelect(x, 0, tensor([0])),
      /indexSelect: index must be an i32 tensor, got f32 \[1\]/,
    ],
    [
      () => indexSelect(x, 0, idx([0, 1], [1, 2])),
      /indexSelect: index must be 0-d or 1-d, got \[1, 2\]/,
    ],
    [
      () => gather(x, 1, idx([0, 1])),
      /gather: index \[2\] must have as many dimensions as the input \[2, 3\]/,
    ],
    [
      () => gather(x, 1, idx([5], [1, 1])),
      /index 5 at position 0 is out of range for a dimension of size 3/,
    ],
    [
      () => gather(x, 0, idx([0, 0, 0, 0], [1, 4])),
      /index size 4 exceeds the input's 3 in dimension 1/,
    ],
    [
      () => gather(x, -3, idx([0], [1, 1])),
      /gather: dimension -3 is out of range for a 2-d tensor/,
    ],
    [() => where(x, x, x), /where: condition must be a bool tensor, got f32 \[2, 3\]/],
    [
      () => where(x.gt(1), x, zeros([4])),
      /where: shapes \[2, 3\] and \[4\] cannot be broadcast together/,
    ],
    [() => maskedFill(x, x, 0), /maskedFill: mask must be a bool tensor, got f32 \[2, 3\]/],
    [
      () => maskedFill(x, zeros([2, 2, 3]).gt(0), 0),
      /maskedFill: mask \[2, 2, 3\] does not broadcast to the input's shape \[2, 3\]/,
    ],
    [() => x.squeeze(2), /squeeze: dimension 2 is out of range for a 2-d tensor/],
    [() => x.unsqueeze(3), /unsqueeze: dimension 3 is out of range for a 3-d tensor/],
    [() => x.permute(0), /permute: dims \[0\] must name each of the 2 dimensions of \[2, 3\] once/],
    [() => x.permute(1, 1), /permute: dims \[1, 1\] repeat a dimension/],
    [() => tensor([1, 2]).tril(), /tril: input must have at least 2 dimensions, got \[2\]/],
    [() => x.triu(0.5), /triu: diagonal must be an integer, got 0.5/],
  ];
  for (const [fn, message] of cases) assert.throws(fn, message);
});

Deno.test("an in-place write to a tensor a backward reads is refused when backward runs", () => {
  const w = tensor([1, 2, 3], [3], { requiresGrad: true });
  const a = tensor([4, 5, 6]);
  const y = w.mul(a).sum();
  a.add_(1);
  assert.throws(
    () => y.backward(),
    /MulBackward: a f32 \[3\] tensor needed for gradient computation was modified by an in-place operation \(it is at version 1, expected 0\)/,
  );
  // gather's backward reads only the index, which an in-place write to the input does not touch.
  const x = tensor([[1, 2], [3, 4]], undefined, { requiresGrad: true });
  const index = tensor([[1], [0]], undefined, { dtype: "i32" });
  const g = x.gather(1, index);
  g.sum().backward();
  assert.deepEqual(x.grad!.tolist(), [[0, 1], [1, 0]]);
});

Deno.test("the new ops free every temporary: memory returns to its baseline after tidy", () => {
  const x = tensor([[1, 2, 3], [4, 5, 6]], undefined, { requiresGrad: true });
  const index = tensor([[2], [0]], undefined, { dtype: "i32" });
  const step = () =>
    tidy(() => {
      const m = x.gt(2);
      const y = cat([where(m, x, 0), x.maskedFill(m, 1).tril()], 1).permute(1, 0).unsqueeze(0);
      const z = y.squeeze(0).sum().add(x.gather(1, index).sum()).add(
        indexSelect(x, 1, index.squeeze(1)).sum(),
      );
      z.backward();
      return eq(x.int(), 2).sum().item() + x.to("i32").add(1).floorDivide(2).sum().item();
    });
  step();
  x.grad!.zero_();
  const before = allocatedBytes();
  for (let i = 0; i < 20; i++) step();
  x.grad!.zero_();
  assert.equal(allocatedBytes(), before);
});
