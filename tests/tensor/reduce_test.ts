/**
 * The order, reduction and matmul ops against PyTorch (reduce.json, made by
 * tests/fixtures/gen_fixtures_reduce.py): outputs, indices and the gradients of
 * sum(out * gradOutput); then the edge cases PyTorch defines (NaN, empty dims) and the errors.
 * @module
 */

import assert from "node:assert/strict";
import {
  allocatedBytes,
  max,
  maximum,
  min,
  randn,
  type Tensor,
  tensor,
  tidy,
  zeros,
} from "../../mod.ts";
import { crossEntropy } from "../../src/tensor/ops/cross_entropy.ts";
import { sumSquares } from "../../src/tensor/ops/reduce.ts";
import { assertClose, fromFixture, loadCases, type OpCase } from "../_harness/fixtures.ts";

interface ReduceCase extends OpCase {
  outputs: OpCase["outputs"] & { indices?: OpCase["outputs"]["out"] };
}

const cases = loadCases<ReduceCase>("reduce.json");

type Dims = number | number[] | null;

/** Runs a fixture's op; max/min over a dimension also return their indices. */
function run(c: ReduceCase, x: Record<string, Tensor>): { out: Tensor; indices?: Tensor } {
  const a = c.args as Record<string, unknown>;
  const dim = a.dim as Dims, keepdim = a.keepdim as boolean;
  switch (c.op) {
    case "clamp":
      return { out: x.x.clamp(a.min as number | null, a.max as number | null) };
    case "abs":
      return { out: x.x.abs() };
    case "maximum":
      return { out: x.a.maximum(x.b) };
    case "minimum":
      return { out: x.a.minimum(x.b) };
    case "max":
    case "min": {
      if (dim === undefined) return { out: x.x[c.op]() };
      const { values, indices } = x.x[c.op](dim as number, keepdim);
      return { out: values, indices };
    }
    case "sum":
      return { out: x.x.sum(dim, keepdim) };
    case "mean":
      return { out: x.x.mean(dim, keepdim) };
    case "var":
    case "std":
      return { out: x.x[c.op](dim, { correction: a.correction as number, keepdim }) };
    case "softmax":
      return { out: x.x.softmax(dim as number) };
    case "logSoftmax":
      return { out: x.x.logSoftmax(dim as number) };
    case "argmax":
      return { out: x.x.argmax(dim as number, keepdim) };
    case "matmul":
      return { out: x.a.matmul(x.b) };
  }
  throw new Error(`${c.name}: unknown op "${c.op}"`);
}

for (const c of cases) {
  Deno.test(`${c.op} matches PyTorch's values and gradients: ${c.name}`, () => {
    tidy(() => {
      const inputs: Record<string, Tensor> = {};
      for (const [name, t] of Object.entries(c.inputs)) {
        inputs[name] = fromFixture(t, t.dtype === "f32" && c.op !== "argmax");
      }
      const { out, indices } = run(c, inputs);
      assert.equal(out.dtype, c.outputs.out.dtype, `${c.name} dtype`);
      assertClose(out, c.outputs.out, `${c.name} out`);
      if (c.outputs.indices) {
        assert.deepEqual(indices!.shape, c.outputs.indices.shape, `${c.name} indices shape`);
        assert.deepEqual(Array.from(indices!.toArray()), c.outputs.indices.data);
      }
      if (c.op === "argmax") return;
      out.backward(fromFixture(c.gradOutput));
      for (const [name, expected] of Object.entries(c.grads)) {
        assertClose(inputs[name].grad!, expected, `${c.name} grad of ${name}`);
      }
    });
  });
}

Deno.test("maximum, max and clamp propagate NaN as PyTorch does", () => {
  tidy(() => {
    const x = tensor([1, NaN, 3]);
    assert.ok(Number.isNaN(maximum(x, tensor([2, 2, 2])).toArray()[1]));
    assert.ok(Number.isNaN(max(x).item()));
    assert.equal(max(x, 0).indices.item(), 1);
    assert.ok(Number.isNaN(min(x).item()));
    assert.ok(Number.isNaN(x.clamp(0, 2).toArray()[1]));
  });
});

Deno.test("max over a dimension sends the gradient to the first of equal values", () => {
  tidy(() => {
    const x = tensor([[2, 5, 5], [7, 7, 1]], undefined, { requiresGrad: true });
    const { values, indices } = x.max(1);
    assert.deepEqual(Array.from(indices.toArray()), [1, 0]);
    values.sum().backward();
    assert.deepEqual(Array.from(x.grad!.toArray()), [0, 1, 0, 1, 0, 0]);
  });
});

Deno.test("var divides by N - correction and gives inf or NaN when that is not positive", () => {
  tidy(() => {
    assert.ok(Number.isNaN(tensor([3]).var().item()));
    assert.equal(tensor([1, 3]).var(null, { correction: 2 }).item(), Infinity);
    assert.equal(tensor([1, 3]).var(null, { correction: 0 }).item(), 1);
  });
});

Deno.test("softmax over a non-last dimension returns a contiguous tensor of the same shape", () => {
  tidy(() => {
    const y = zeros([2, 3, 4]).softmax(1);
    assert.deepEqual(y.shape, [2, 3, 4]);
    assert.ok(y.isContiguous());
    assertClose(y, new Array(24).fill(1 / 3), "uniform softmax");
  });
});

Deno.test("backward through the new ops frees their buffers: only the leaves' gradients stay", () => {
  tidy(() => {
    const x = randn([4, 5, 6], { requiresGrad: true }),
      w = randn([2, 1, 4, 3], { requiresGrad: true });
    // a transposed input makes every op copy it first; the copies belong to the graph
    const xt = () => x.transpose(0, 2);
    const y = tensor(Int32Array.from([0, 1, 2, 3, -100, 1]), [6], { dtype: "i32" });
    const losses: [string, () => Tensor][] = [
      ["clamp + abs", () => xt().clamp(-1, 1).abs().sum()],
      ["maximum broadcast", () => xt().maximum(w.sum([0, 1, 3])).sum()],
      ["softmax dim 1", () => xt().softmax(1).mul(xt()).sum()],
      ["logSoftmax dim 0", () => xt().logSoftmax(0).mul(xt()).sum()],
      ["max dim + min", () => xt().max(1, true).values.sum().add(xt().min())],
      ["var + std", () => xt().var([0, 2], { keepdim: true }).sum().add(xt().std())],
      ["mean over dims", () => xt().mean([0, 1]).sum()],
      ["crossEntropy none", () => crossEntropy(xt().sum(1), y, { reduction: "none" }).sum()],
      ["crossEntropy smoothed", () => crossEntropy(xt().sum(1), y, { labelSmoothing: 0.1 })],
      ["matmul broadcast", () => xt().matmul(w).sum()],
      ["matmul vector", () => xt().matmul(w.sum([0, 1, 3])).sum()],
    ];
    for (const [, loss] of losses) loss().backward();
    for (const [name, loss] of losses) {
      const l = loss();
      const before = allocatedBytes();
      l.backward();
      assert.ok(
        allocatedBytes() <= before,
        `${name}: backward kept ${allocatedBytes() - before} bytes`,
      );
    }
  });
});

Deno.test("order and reduction ops name the argument and the value they refuse", () => {
  tidy(() => {
    const t = zeros([2, 3]);
    assert.throws(() => t.clamp(), /clamp: at least one of min and max must be given, got neither/);
    assert.throws(
      () => t.clamp("1" as unknown as number),
      /clamp: min must be a number, got string 1/,
    );
    assert.throws(
      () => t.maximum(zeros([4])),
      /maximum: shapes \[2, 3\] and \[4\] cannot be broadcast together/,
    );
    assert.throws(() => t.max(2), /max: dimension 2 is out of range for a 2-d tensor/);
    assert.throws(() => zeros([0]).max(), /max: expected a non-empty tensor, got \[0\]/);
    assert.throws(() => zeros([2, 0]).min(1), /min: dimension 1 of \[2, 0\] is empty/);
    assert.throws(() => t.sum([0, -2]), /sum: dimension 0 appears more than once in \[0,-2\]/);
    assert.throws(() => t.mean([0, 5]), /mean: dimension 5 is out of range for a 2-d tensor/);
    assert.throws(
      () => t.var(0, { correction: NaN }),
      /var: correction must be a finite number, got NaN/,
    );
    assert.throws(() => t.argmax(-3), /argmax: dimension -3 is out of range for a 2-d tensor/);
    assert.throws(() => t.logSoftmax(4), /logSoftmax: dimension 4 is out of range/);
    assert.throws(
      () => tensor([1], [1], { dtype: "i32" }).abs(),
      /abs: expected an f32 tensor, got i32 \[1\]/,
    );
    assert.throws(
      () => zeros([]).matmul(zeros([2])),
      /matmul: both arguments need at least 1 dimension, got \[\] and \[2\]/,
    );
  });
});

Deno.test("sumSquares: the squared L2 norm in one pass, on views, empty tensors and non-finite values", () => {
  // 1003 elements: eight-lane blocks and a tail; the reference sums the float squares in double.
  const x = randn([17, 59]);
  const squares = Array.from(x.toArray(), (v) => Math.fround(v * v));
  const expected = Math.fround(squares.reduce((a, b) => a + b, 0));
  assert.equal(sumSquares(x).item(), expected);
  const t = x.transpose(0, 1); // a view: summed from its contiguous copy, same value
  assert.ok(Math.abs(sumSquares(t).item() - expected) <= 1e-6 * expected);
  assert.equal(sumSquares(zeros([0, 3])).item(), 0);
  assert.ok(Number.isNaN(sumSquares(tensor([1, NaN, 2])).item()));
  assert.equal(sumSquares(tensor([1, -Infinity])).item(), Infinity);
  assert.throws(() => sumSquares(tensor([1, 2], [2], { dtype: "i32" })), /sumSquares/);
});
