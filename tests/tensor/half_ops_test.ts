// Ops on bf16 and f16 tensors against PyTorch's CPU kernels (tests/fixtures/gen_half_ops.py):
// outputs and gradients compared in units in the last place of the half dtype.

import assert from "node:assert/strict";
import { F, type Tensor, tensor } from "../../mod.ts";
import { backward } from "../../src/tensor/autograd.ts";

interface Enc {
  shape: number[];
  dtype: string;
  data: number[];
}
interface Case {
  name: string;
  op: string;
  dtype: "bf16" | "f16";
  inputs: Record<string, Enc>;
  gradOutput: Enc;
  outputs: Record<string, Enc>;
  grads: Record<string, Enc>;
}

const fixture = JSON.parse(
  Deno.readTextFileSync(new URL("../fixtures/half_ops.json", import.meta.url)),
) as { cases: Case[] };

/** A tensor of the fixture's values in its dtype (a half's values are exact in f32). */
function make(e: Enc, grad: boolean): Tensor {
  if (e.dtype === "i32") return tensor(e.data, e.shape, { dtype: "i32" });
  const f32 = tensor(e.data, e.shape);
  const t = e.dtype === "float32" ? f32 : f32.to(e.dtype === "bfloat16" ? "bf16" : "f16");
  if (grad) t.requiresGrad_(true);
  return t;
}

/** |a - b| in units in the last place of `dtype` at the larger magnitude. */
function ulps(a: number, b: number, dtype: string): number {
  if (a === b) return 0;
  const [mant, minExp] = dtype === "bf16" ? [7, -126] : [10, -14];
  const mag = Math.max(Math.abs(a), Math.abs(b));
  const e = Math.max(Math.floor(Math.log2(mag)), minExp);
  return Math.abs(a - b) / 2 ** (e - mant);
}

/**
 * The largest difference from `want`, in ulps at each element's magnitude, or with `atScale` at
 * the tensor's largest magnitude (for sums whose terms PyTorch rounds one by one, where a value
 * that cancels to near zero carries the terms' absolute error).
 */
function maxUlps(got: Tensor, want: Enc, dtype: string, atScale = false): number {
  assert.deepEqual(got.shape, want.shape);
  const values = got.to("f32").toArray() as Float32Array;
  const scale = Math.max(...want.data.map(Math.abs));
  let worst = 0;
  values.forEach((v, i) => {
    const w = want.data[i];
    const d = atScale ? ulps(Math.abs(v - w) + scale, scale, dtype) : ulps(v, w, dtype);
    worst = Math.max(worst, d);
  });
  return worst;
}

const OPS: Record<string, (x: Record<string, Tensor>) => Tensor> = {
  add: ({ a, b }) => a.add(b),
  sub: ({ a, b }) => a.sub(b),
  mul: ({ a, b }) => a.mul(b),
  div: ({ a, b }) => a.div(b),
  exp: ({ x }) => x.exp(),
  tanh: ({ x }) => x.tanh(),
  sigmoid: ({ x }) => x.sigmoid(),
  gelu: ({ x }) => x.gelu(),
  geluTanh: ({ x }) => x.gelu("tanh"),
  relu: ({ x }) => x.relu(),
  neg: ({ x }) => x.neg(),
  abs: ({ x }) => x.abs(),
  sqrt: ({ x }) => x.sqrt(),
  log: ({ x }) => x.log(),
  mulScalar: ({ x }) => x.mul(0.1),
  addScalar: ({ x }) => x.add(0.3),
  sum: ({ x }) => x.sum(1),
  mean: ({ x }) => x.mean(),
  softmax: ({ x }) => x.softmax(-1),
  logSoftmax: ({ x }) => x.logSoftmax(-1),
  layerNorm: ({ x, w, b }) => F.layerNorm(x, [16], w, b),
  matmul: ({ a, b }) => a.matmul(b),
  linear: ({ x, w, b }) => F.linear(x, w, b),
  crossEntropy: ({ x, t }) => F.crossEntropy(x, t),
  embedding: ({ i, w }) => F.embedding(i, w),
  scaledDotProductAttention: ({ q, k, v }) =>
    F.scaledDotProductAttention(q, k, v, { isCausal: true }),
};

/**
 * The most each op may differ from PyTorch: outputs in ulps at each element, gradients in ulps
 * at the gradient's largest magnitude. 0 (bit for bit) unless listed: PyTorch rounds a broadcast
 * operand's products one by one before summing them (mul, div), sums in another order (layer
 * norm's weight gradients, sigmoid's f16 gradient), and its flash attention rounds the
 * probabilities to the half dtype before multiplying by v.
 */
const TOLERANCE: Record<string, { out: number; grad: number }> = {
  mul: { out: 0, grad: 1.25 },
  div: { out: 0, grad: 1 },
  sigmoid: { out: 0, grad: 1 },
  layerNorm: { out: 0, grad: 1 },
  layerNormF32Weight: { out: 0, grad: 1 },
  scaledDotProductAttention: { out: 4, grad: 1 },
};

for (const c of fixture.cases) {
  const tol = TOLERANCE[c.name.split("/")[0]] ?? TOLERANCE[c.op] ?? { out: 0, grad: 0 };
  Deno.test(`${c.name}: output within ${tol.out} and gradients within ${tol.grad} ulps of PyTorch's`, () => {
    const inputs = Object.fromEntries(
      Object.entries(c.inputs).map(([k, e]) => [k, make(e, k in c.grads)]),
    );
    const out = OPS[c.op](inputs);
    assert.equal(out.dtype, c.dtype);
    const outUlps = maxUlps(out, c.outputs.out, c.dtype);
    let gradUlps = 0;
    if (Object.keys(c.grads).length > 0) {
      backward(out, make(c.gradOutput, false));
      for (const [k, want] of Object.entries(c.grads)) {
        assert.equal(inputs[k].grad!.dtype, inputs[k].dtype, `${k}'s gradient dtype`);
        gradUlps = Math.max(gradUlps, maxUlps(inputs[k].grad!, want, c.dtype, true));
      }
    }
    assert.ok(outUlps <= tol.out, `output ${outUlps} ulps from PyTorch's`);
    assert.ok(gradUlps <= tol.grad, `gradients ${gradUlps} ulps from PyTorch's`);
  });
}
