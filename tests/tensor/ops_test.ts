/**
 * Every case of tests/fixtures/ops.json and nn.json: dtrain's forward output and the gradients of
 * every f32 input (for the case's gradOutput) must match PyTorch within 1e-5 relative.
 * @module
 */

import assert from "node:assert/strict";
import { type Tensor, tidy } from "../../mod.ts";
import { linear } from "../../src/tensor/ops/matmul.ts";
import { embedding, layerNorm, mseLoss } from "../../src/tensor/ops/nn.ts";
import { crossEntropy } from "../../src/tensor/ops/cross_entropy.ts";
import { assertClose, fromFixture, loadCases, type OpCase } from "../_harness/fixtures.ts";

type Inputs = Record<string, Tensor>;

/** How each fixture `op` runs in dtrain. */
const OPS: Record<string, (x: Inputs, args: Record<string, unknown>) => Tensor> = {
  matmul: ({ a, b }, args) => (args.transA ? a.t() : a).matmul(args.transB ? b.t() : b),
  add: ({ a, b }) => a.add(b),
  sub: ({ a, b }) => a.sub(b),
  mul: ({ a, b }) => a.mul(b),
  div: ({ a, b }) => a.div(b),
  mulScalar: ({ x }, args) => x.mul(args.scalar as number),
  relu: ({ x }) => x.relu(),
  gelu: ({ x }, args) => x.gelu(args.approximate as "none" | "tanh"),
  softmax: ({ x }, args) => x.softmax(args.dim as number),
  logSoftmax: ({ x }, args) => x.logSoftmax(args.dim as number),
  sum: ({ x }, args) => x.sum(args.dim as number | undefined, args.keepdim as boolean | undefined),
  mean: ({ x }, args) =>
    x.mean(args.dim as number | undefined, args.keepdim as boolean | undefined),
  exp: ({ x }) => x.exp(),
  log: ({ x }) => x.log(),
  tanh: ({ x }) => x.tanh(),
  sigmoid: ({ x }) => x.sigmoid(),
  neg: ({ x }) => x.neg(),
  sqrt: ({ x }) => x.sqrt(),
  pow: ({ x }, args) => x.pow(args.exponent as number),
  crossEntropy: ({ logits, targets }, args) => {
    assert.equal(args.reduction, "mean");
    return crossEntropy(logits, targets, { ignoreIndex: args.ignoreIndex as number });
  },
  mseLoss: ({ input, target }, args) => {
    assert.equal(args.reduction, "mean");
    return mseLoss(input, target);
  },
  layerNorm: ({ x, weight, bias }, args) =>
    layerNorm(x, args.normalizedShape as number[], weight, bias, args.eps as number),
  embedding: ({ weight, indices }) => embedding(indices, weight),
  linear: ({ x, weight, bias }, args) => {
    assert.equal(args.bias, bias !== undefined, "args.bias disagrees with the inputs");
    return linear(x, weight, bias);
  },
};

function runCase(c: OpCase): void {
  const run = OPS[c.op];
  if (run === undefined) {
    throw new Error(`${c.name}: unknown fixture op "${c.op}"; map it to a dtrain call in OPS`);
  }
  tidy(() => {
    const inputs: Inputs = {};
    for (const [name, t] of Object.entries(c.inputs)) {
      inputs[name] = fromFixture(t, t.dtype === "f32");
    }
    const out = run(inputs, c.args);
    assertClose(out, c.outputs.out, `${c.name} output`);
    out.backward(fromFixture(c.gradOutput));
    const f32Inputs = Object.keys(c.inputs).filter((k) => c.inputs[k].dtype === "f32").sort();
    assert.deepEqual(Object.keys(c.grads).sort(), f32Inputs, `${c.name}: grads in the fixture`);
    for (const [name, expected] of Object.entries(c.grads)) {
      const grad = inputs[name].grad;
      assert.ok(grad !== null, `${c.name}: input ${name} got no gradient`);
      assertClose(grad, expected, `${c.name} grad of ${name}`);
    }
  });
}

for (const file of ["ops.json", "nn.json"]) {
  const cases = loadCases(file);
  Deno.test(`${file} has cases and unique names`, () => {
    assert.ok(cases.length > 0);
    assert.equal(new Set(cases.map((c) => c.name)).size, cases.length);
  });
  for (const c of cases) {
    Deno.test(`${c.op} matches PyTorch forward and backward: ${file} ${c.name}`, () => runCase(c));
  }
}
