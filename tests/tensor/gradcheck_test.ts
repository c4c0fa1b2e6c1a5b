/**
 * Finite-difference gradient checks: for each differentiable op, the gradient from `backward()`
 * must agree with central differences of sum(f(x) * w), computed in float64 from repeated f32
 * forward passes and Richardson-extrapolated. The tolerance (3e-4 relative + 3e-5 absolute) is
 * about three times the worst disagreement of correct gradients, which is the f32 rounding of the
 * forward passes divided by the step; a wrong term in a gradient is far larger.
 * @module
 */

import assert from "node:assert/strict";
import { manualSeed, noGrad, randn, type Tensor, tensor, tidy } from "../../mod.ts";
import { linear } from "../../src/tensor/ops/matmul.ts";
import { dropout, embedding, layerNorm, mseLoss } from "../../src/tensor/ops/nn.ts";
import { crossEntropy } from "../../src/tensor/ops/cross_entropy.ts";
import { assertClose } from "../_harness/fixtures.ts";

/** A deterministic generator of floats in [0, 1) (mulberry32). */
function generator(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = Math.imul(s ^ (s >>> 15), 1 | s);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** An input of a checked function: f32 values that get perturbed, or fixed i32 indices. */
interface Input {
  shape: number[];
  data: Float32Array | Int32Array;
}

const random = generator(0x5eed);

/** Uniform f32 values in [low, high); with `gap`, none within `gap` of zero (kinks of relu). */
function uniform(shape: number[], low = -1, high = 1, gap = 0): Input {
  const n = shape.reduce((a, b) => a * b, 1);
  const data = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    let v = 0;
    do v = low + (high - low) * random(); while (Math.abs(v) < gap);
    data[i] = v;
  }
  return { shape, data };
}

function indices(shape: number[], values: number[]): Input {
  return { shape, data: Int32Array.from(values) };
}

function toTensors(inputs: readonly Input[], requiresGrad: boolean): Tensor[] {
  return inputs.map((x) =>
    tensor(x.data.slice(), x.shape, {
      dtype: x.data instanceof Float32Array ? "f32" : "i32",
      requiresGrad: requiresGrad && x.data instanceof Float32Array,
    })
  );
}

interface CheckOptions {
  eps?: number;
  rtol?: number;
  atol?: number;
}

/**
 * Compares the analytic gradient of sum(f(inputs) * w), w random, with central differences in
 * float64 for every element of every f32 input. The steps (eps and 2 eps) stay inside the gap
 * that inputs of kinked functions keep from the kink (0.1 for relu).
 */
function gradcheck(
  f: (xs: Tensor[]) => Tensor,
  inputs: Input[],
  { eps = 2e-2, rtol = 3e-4, atol = 3e-5 }: CheckOptions = {},
): void {
  const outShape = tidy(() => noGrad(() => [...f(toTensors(inputs, false)).shape]));
  const w = uniform(outShape).data as Float32Array;
  const objective = (xs: Input[]): number =>
    tidy(() =>
      noGrad(() => {
        const out = f(toTensors(xs, false)).toArray();
        let total = 0;
        for (let i = 0; i < out.length; i++) total += out[i] * w[i];
        return total;
      })
    );
  tidy(() => {
    const xs = toTensors(inputs, true);
    f(xs).backward(tensor(w, outShape));
    inputs.forEach((input, k) => {
      if (!(input.data instanceof Float32Array)) return;
      const numeric = new Float64Array(input.data.length);
      const at = (data: Float32Array) => inputs.map((x, i) => (i === k ? { ...x, data } : x));
      // The central difference with step h, over the steps that f32 actually took.
      const central = (j: number, h: number): [number, number] => {
        const plus = input.data.slice() as Float32Array, minus = input.data.slice() as Float32Array;
        plus[j] += h;
        minus[j] -= h;
        const step = plus[j] - minus[j];
        return [(objective(at(plus)) - objective(at(minus))) / step, (step / 2) ** 2];
      };
      for (let j = 0; j < input.data.length; j++) {
        // Richardson extrapolation of steps eps and 2 eps cancels the eps² error term, leaving
        // O(eps⁴) truncation and the f32 rounding of the forward passes (about 1e-6 relative).
        const [near, near2] = central(j, eps), [far, far2] = central(j, 2 * eps);
        numeric[j] = (far2 * near - near2 * far) / (far2 - near2);
      }
      const grad = xs[k].grad;
      assert.ok(grad !== null, `input ${k} got no gradient`);
      assert.deepEqual(grad.shape, input.shape, `gradient shape of input ${k}`);
      assertClose(grad, numeric, `gradient of input ${k}`, { rtol, atol });
    });
  });
}

// ---------------------------------------------------------------- elementwise

for (const op of ["add", "sub", "mul", "div"] as const) {
  const positive = (shape: number[]) => uniform(shape, 0.5, 1.5);
  const cases: [string, Input, Input][] = [
    ["[3,4] and [3,4]", uniform([3, 4]), positive([3, 4])],
    ["[3,1] and [1,4] (both expand)", uniform([3, 1]), positive([1, 4])],
    ["[2,3,4] and [3,1]", uniform([2, 3, 4]), positive([3, 1])],
    ["[4] and [2,3,4] (left operand broadcast)", uniform([4]), positive([2, 3, 4])],
    ["[2,1,4] and [3,1]", uniform([2, 1, 4]), positive([3, 1])],
    ["[] and [2,3]", uniform([]), positive([2, 3])],
    ["[2,3] and []", uniform([2, 3]), positive([])],
  ];
  for (const [shapes, a, b] of cases) {
    Deno.test(`gradcheck ${op} broadcasting ${shapes}`, () => {
      gradcheck(([x, y]) => x[op](y), [a, b]);
    });
  }
}

Deno.test("gradcheck mul, add, sub, div by a number", () => {
  gradcheck(([x]) => x.mul(-1.5).add(0.25).sub(2).div(4), [uniform([3, 4])]);
});

const UNARY: [string, (x: Tensor) => Tensor, Input][] = [
  ["relu", (x) => x.relu(), uniform([3, 5], -1, 1, 0.1)],
  ["gelu (erf)", (x) => x.gelu(), uniform([3, 5], -3, 3)],
  ["gelu (tanh)", (x) => x.gelu("tanh"), uniform([3, 5], -3, 3)],
  ["exp", (x) => x.exp(), uniform([3, 5])],
  ["log", (x) => x.log(), uniform([3, 5], 0.5, 3)],
  ["tanh", (x) => x.tanh(), uniform([3, 5], -2, 2)],
  ["sigmoid", (x) => x.sigmoid(), uniform([3, 5], -3, 3)],
  ["neg", (x) => x.neg(), uniform([3, 5])],
  ["sqrt", (x) => x.sqrt(), uniform([3, 5], 0.5, 4)],
  ["pow 2", (x) => x.pow(2), uniform([3, 5])],
  ["pow 3", (x) => x.pow(3), uniform([3, 5])],
  ["pow -1.5", (x) => x.pow(-1.5), uniform([3, 5], 0.5, 2)],
  ["softmax", (x) => x.softmax(), uniform([3, 5], -2, 2)],
  ["softmax of [2,3,4]", (x) => x.softmax(-1), uniform([2, 3, 4], -2, 2)],
  ["logSoftmax", (x) => x.logSoftmax(), uniform([3, 5], -2, 2)],
  ["logSoftmax of [2,3,4]", (x) => x.logSoftmax(-1), uniform([2, 3, 4], -2, 2)],
  ["sum", (x) => x.sum(), uniform([3, 4])],
  ["sum dim 0", (x) => x.sum(0), uniform([3, 4, 2])],
  ["sum dim 1 keepdim", (x) => x.sum(1, true), uniform([3, 4, 2])],
  ["mean", (x) => x.mean(), uniform([3, 4])],
  ["mean dim -1", (x) => x.mean(-1), uniform([3, 4, 2])],
  ["mean dim 1 keepdim", (x) => x.mean(1, true), uniform([3, 4, 2])],
];
for (const [name, f, x] of UNARY) {
  Deno.test(`gradcheck ${name}`, () => gradcheck(([t]) => f(t), [x]));
}

Deno.test({
  name: "pow(0) has a zero gradient everywhere, x = 0 included, like PyTorch",
  fn: () => {
    tidy(() => {
      const x = tensor([0, 2, -1], [3], { requiresGrad: true });
      x.pow(0).sum().backward();
      assert.deepEqual(Array.from(x.grad!.toArray()), [0, 0, 0]);
    });
  },
});

Deno.test({
  name: "sum(0) and mean(-1) of a 0-d tensor return it, with its gradient, like PyTorch",
  fn: () => {
    tidy(() => {
      const x = tensor([3], [], { requiresGrad: true });
      const y = x.sum(0).add(x.mean(-1));
      assert.deepEqual(y.shape, []);
      assert.equal(y.item(), 6);
      y.backward();
      assert.equal(x.grad!.item(), 2);
    });
  },
});

Deno.test("gradcheck a leaf used several times: x*x + exp(x) - x", () => {
  gradcheck(([x]) => x.mul(x).add(x.exp()).sub(x), [uniform([2, 3])]);
});

// ---------------------------------------------------------------- shape

Deno.test("gradcheck transpose then reshape (a copy) then mul", () => {
  gradcheck(
    ([x, c]) => x.transpose(0, 2).reshape(4, 6).mul(c),
    [uniform([2, 3, 4]), uniform([4, 6])],
  );
});

Deno.test("gradcheck reshape, transpose, contiguous, view and flatten chain", () => {
  gradcheck(
    ([x]) => x.reshape(3, 4).t().contiguous().view(2, 6).transpose(0, 1).flatten().mul(x.flatten()),
    [uniform([2, 6])],
  );
});

Deno.test("gradcheck expand of [3,1] to [2,3,4] and of [4] to [3,4]", () => {
  gradcheck(([a, b]) => a.expand(2, 3, 4).mul(b.expand(3, 4)), [uniform([3, 1]), uniform([4])]);
});

Deno.test("gradcheck clone, and a detached factor is a constant to backward", () => {
  gradcheck(([x]) => x.clone().exp(), [uniform([3, 2])]);
  tidy(() => {
    const [x, k] = toTensors([uniform([3, 2]), uniform([3, 2])], true);
    x.clone().mul(k.detach()).sum().backward();
    assert.deepEqual(x.grad!.toArray(), k.toArray());
    assert.equal(k.grad, null);
  });
});

// ---------------------------------------------------------------- matmul and linear

Deno.test("gradcheck matmul [3,4] @ [4,5]", () => {
  gradcheck(([a, b]) => a.matmul(b), [uniform([3, 4]), uniform([4, 5])]);
});

Deno.test("gradcheck matmul of transposed views a.t() @ b.t()", () => {
  gradcheck(([a, b]) => a.t().matmul(b.t()), [uniform([4, 3]), uniform([5, 4])]);
});

Deno.test("gradcheck matmul a.t() @ b and a @ b.t()", () => {
  gradcheck(([a, b]) => a.t().matmul(b), [uniform([4, 3]), uniform([4, 5])]);
  gradcheck(([a, b]) => a.matmul(b.t()), [uniform([3, 4]), uniform([5, 4])]);
});

Deno.test("gradcheck matmul of an expanded (copied) operand", () => {
  gradcheck(([a, b]) => a.expand(3, 4).matmul(b), [uniform([3, 1]), uniform([4, 2])]);
});

Deno.test("gradcheck matmul [2,3,4] @ [4,5] and batched [2,3,4] @ [2,4,5]", () => {
  gradcheck(([a, b]) => a.matmul(b), [uniform([2, 3, 4]), uniform([4, 5])]);
  gradcheck(([a, b]) => a.matmul(b), [uniform([2, 3, 4]), uniform([2, 4, 5])]);
});

Deno.test("gradcheck linear with and without bias", () => {
  gradcheck(([x, w, b]) => linear(x, w, b), [uniform([5, 7]), uniform([3, 7]), uniform([3])]);
  gradcheck(([x, w]) => linear(x, w), [uniform([5, 7]), uniform([3, 7])]);
});

Deno.test("gradcheck linear on a [2,3,4] input and a transposed weight view", () => {
  gradcheck(([x, wT, b]) => linear(x, wT.t(), b), [
    uniform([2, 3, 4]),
    uniform([4, 5]),
    uniform([5]),
  ]);
});

// ---------------------------------------------------------------- nn

Deno.test("gradcheck layerNorm with weight and bias, on [2,3,6]", () => {
  gradcheck(
    ([x, w, b]) => layerNorm(x, [6], w, b),
    [uniform([2, 3, 6], -2, 2), uniform([6], 0.5, 1.5), uniform([6])],
  );
});

Deno.test("gradcheck layerNorm without affine parameters", () => {
  gradcheck(([x]) => layerNorm(x, [5]), [uniform([4, 5], -2, 2)]);
});

Deno.test("gradcheck layerNorm over two trailing dimensions", () => {
  gradcheck(
    ([x, w, b]) => layerNorm(x, [2, 3], w, b),
    [uniform([4, 2, 3], -2, 2), uniform([2, 3], 0.5, 1.5), uniform([2, 3])],
  );
});

Deno.test("gradcheck crossEntropy with ignored rows", () => {
  gradcheck(
    ([logits, targets]) => crossEntropy(logits, targets),
    [uniform([5, 4], -2, 2), indices([5], [3, -100, 0, 2, -100])],
  );
  gradcheck(
    ([logits, targets]) => crossEntropy(logits, targets, { ignoreIndex: 1 }),
    [uniform([4, 3], -2, 2), indices([4], [1, 0, 2, 1])],
  );
});

Deno.test("gradcheck crossEntropy of a transposed logits view", () => {
  gradcheck(
    ([logits, targets]) => crossEntropy(logits.t(), targets),
    [uniform([4, 3], -2, 2), indices([3], [0, 3, 1])],
  );
});

Deno.test("gradcheck mseLoss with respect to both arguments", () => {
  gradcheck(([a, b]) => mseLoss(a, b), [uniform([4, 5]), uniform([4, 5])]);
});

Deno.test("gradcheck embedding with repeated indices", () => {
  gradcheck(([w, idx]) => embedding(idx, w), [
    uniform([6, 3]),
    indices([2, 3], [1, 5, 1, 0, 1, 5]),
  ]);
});

Deno.test("gradcheck dropout with a fixed seed", () => {
  gradcheck(([x]) => {
    manualSeed(1234);
    return dropout(x, 0.3);
  }, [uniform([4, 6], -1, 1, 0.05)]);
});

Deno.test("dropout backward uses the forward's mask even after other random draws", () => {
  tidy(() => {
    const n = 4000, p = 0.25;
    manualSeed(7);
    const x = tensor(uniform([n], 0.5, 1.5).data, [n], { requiresGrad: true });
    const y = dropout(x, p);
    randn([100]);
    const w = uniform([n]).data as Float32Array;
    y.backward(tensor(w, [n]));
    const xs = x.toArray(), ys = y.toArray(), g = x.grad!.toArray();
    let dropped = 0;
    for (let i = 0; i < n; i++) {
      const kept = ys[i] !== 0;
      if (!kept) dropped++;
      assert.equal(
        g[i],
        kept ? Math.fround(w[i] * Math.fround(1 / (1 - p))) : 0,
        `grad at ${i}`,
      );
      if (kept) assertClose([ys[i]], [xs[i] / (1 - p)], `output at ${i}`);
    }
    assert.ok(Math.abs(dropped / n - p) < 0.03, `dropped fraction ${dropped / n}, p ${p}`);
  });
});

Deno.test("dropout is the identity with p = 0 or in eval mode, and zeros with p = 1", () => {
  tidy(() => {
    const x = tensor([1, -2, 3, 4], [4], { requiresGrad: true });
    assert.deepEqual(Array.from(dropout(x, 0).toArray()), [1, -2, 3, 4]);
    assert.deepEqual(Array.from(dropout(x, 0.5, false).toArray()), [1, -2, 3, 4]);
    const zeroed = dropout(x, 1);
    assert.deepEqual(Array.from(zeroed.toArray()), [0, 0, 0, 0]);
    zeroed.sum().backward();
    assert.deepEqual(Array.from(x.grad!.toArray()), [0, 0, 0, 0]);
  });
});

Deno.test("the same seed gives the same dropout mask", () => {
  tidy(() => {
    const x = tensor(uniform([64], 0.5, 1.5).data, [64]);
    manualSeed(99);
    const a = dropout(x, 0.5).toArray();
    manualSeed(99);
    const b = dropout(x, 0.5).toArray();
    assert.deepEqual(a, b);
  });
});
