/**
 * RMSNorm, SiLU, the losses' reductions, label smoothing and BCE-with-logits, and clipGradNorm
 * against PyTorch (layers.json, made by tests/fixtures/gen_fixtures_models.py): outputs and the
 * gradients of sum(out * gradOutput).
 * @module
 */

import assert from "node:assert/strict";
import { F, nn, type Tensor, tidy } from "../../mod.ts";
import {
  assertClose,
  type FixtureTensor,
  fromFixture,
  loadCases,
  type OpCase,
} from "../_harness/fixtures.ts";

interface ClipCase {
  name: string;
  op: "clipGradNorm";
  args: { maxNorm: number; normType: number | "inf" };
  grads: Record<string, FixtureTensor>;
  totalNorm: FixtureTensor;
  clipped: Record<string, FixtureTensor>;
}

const cases = loadCases<OpCase | ClipCase>("layers.json");
const isClip = (c: OpCase | ClipCase): c is ClipCase => c.op === "clipGradNorm";
// The repr cases are module_test.ts's.
const isOp = (c: OpCase | ClipCase): c is OpCase => !isClip(c) && c.op !== "repr";

/** Runs a fixture's op on its inputs (a module for rmsNorm/silu, to test the layers too). */
function run(c: OpCase, inputs: Record<string, Tensor>): Tensor {
  const a = c.args as Record<string, unknown>;
  const argTensor = (key: string) => a[key] ? fromFixture(a[key] as FixtureTensor) : null;
  switch (c.op) {
    case "rmsNorm": {
      const norm = new nn.RMSNorm(a.normalizedShape as number[], {
        eps: a.eps as number | null,
        elementwiseAffine: a.elementwiseAffine as boolean,
      });
      if (inputs.weight) inputs.weight = norm.weight = new nn.Parameter(inputs.weight);
      // The module's output, and the functional form's must be the same values.
      const out = norm.forward(inputs.x);
      const functional = F.rmsNorm(
        inputs.x,
        a.normalizedShape as number[],
        inputs.weight,
        a.eps as number,
      );
      assert.deepEqual(
        functional.toArray(),
        out.toArray(),
        `${c.name}: F.rmsNorm equals nn.RMSNorm`,
      );
      return out;
    }
    case "silu":
      return new nn.SiLU().forward(inputs.x);
    case "binaryCrossEntropyWithLogits":
      return F.binaryCrossEntropyWithLogits(inputs.input, inputs.target, {
        reduction: a.reduction as F.Reduction,
        weight: argTensor("weight"),
        posWeight: argTensor("posWeight"),
      });
    case "crossEntropy":
      return F.crossEntropy(inputs.logits, inputs.targets, {
        reduction: a.reduction as F.Reduction,
        ignoreIndex: a.ignoreIndex as number,
        labelSmoothing: a.labelSmoothing as number,
      });
    case "mseLoss":
      return F.mseLoss(inputs.input, inputs.target, { reduction: a.reduction as F.Reduction });
  }
  throw new Error(`${c.name}: unknown op "${c.op}"`);
}

for (const c of cases.filter(isOp)) {
  Deno.test(`${c.op} matches PyTorch's output and gradients: ${c.name}`, () => {
    tidy(() => {
      const inputs: Record<string, Tensor> = {};
      for (const [name, t] of Object.entries(c.inputs)) {
        inputs[name] = fromFixture(t, t.dtype === "f32");
      }
      const out = run(c, inputs);
      assertClose(out, c.outputs.out, `${c.name} out`);
      out.backward(fromFixture(c.gradOutput));
      for (const [name, expected] of Object.entries(c.grads)) {
        assertClose(inputs[name].grad!, expected, `${c.name} grad of ${name}`);
      }
    });
  });
}

for (const c of cases.filter(isClip)) {
  Deno.test(`clipGradNorm returns PyTorch's total norm and clipped gradients: ${c.name}`, () => {
    tidy(() => {
      const params = Object.values(c.grads).map((g) => {
        const p = new nn.Parameter(fromFixture({ ...g, data: g.data.map(() => 0) }));
        p.grad = fromFixture(g);
        return p;
      });
      const normType = c.args.normType === "inf" ? Infinity : c.args.normType;
      const total = nn.utils.clipGradNorm(params, c.args.maxNorm, normType);
      assertClose([total], c.totalNorm, `${c.name} total norm`);
      Object.values(c.clipped).forEach((expected, i) => {
        assertClose(params[i].grad!, expected, `${c.name} clipped grad ${i}`);
      });
    });
  });
}

Deno.test("clipGradNorm skips parameters without gradients and refuses bad arguments", () => {
  tidy(() => {
    const p = new nn.Parameter(fromFixture({ shape: [2], dtype: "f32", data: [1, 1] }));
    assert.equal(nn.utils.clipGradNorm([p], 1), 0);
    p.grad = fromFixture({ shape: [2], dtype: "f32", data: [Infinity, 1] });
    assert.throws(
      () => nn.utils.clipGradNorm(p, 1, 2, { errorIfNonfinite: true }),
      /total norm of order 2 of the gradients is Infinity/,
    );
    assert.throws(() => nn.utils.clipGradNorm(p, 1, 0), /normType must be positive .* got 0/);
  });
});

Deno.test("clipGradNorm with errorIfNonfinite throws on a NaN or infinite total, leaving the gradients as they were", () => {
  tidy(() => {
    for (const bad of [NaN, -Infinity]) {
      const a = new nn.Parameter(fromFixture({ shape: [2], dtype: "f32", data: [0, 0] }));
      const b = new nn.Parameter(fromFixture({ shape: [1], dtype: "f32", data: [0] }));
      a.grad = fromFixture({ shape: [2], dtype: "f32", data: [3, 4] });
      b.grad = fromFixture({ shape: [1], dtype: "f32", data: [bad] });
      for (const normType of [2, Infinity]) {
        assert.throws(
          () => nn.utils.clipGradNorm([a, b], 1, normType, { errorIfNonfinite: true }),
          (e: Error) => e instanceof RangeError && e.message.includes(`is ${Math.abs(bad)}, so`),
        );
        assert.deepEqual(Array.from(a.grad.toArray()), [3, 4], "untouched");
      }
      // Without the option it scales by the non-finite total, as PyTorch does.
      assert.ok(Number.isNaN(nn.utils.clipGradNorm([a, b], 1) * 0));
      const scaled = a.grad.toArray()[0];
      assert.ok(Number.isNaN(bad) ? Number.isNaN(scaled) : scaled === 0, `scaled to ${scaled}`);
    }
  });
});

Deno.test("losses name a bad reduction, label smoothing or target", () => {
  tidy(() => {
    const logits = fromFixture({ shape: [2, 3], dtype: "f32", data: [0, 1, 2, 3, 4, 5] });
    const targets = fromFixture({ shape: [2], dtype: "i32", data: [0, 3] });
    assert.throws(
      () => F.crossEntropy(logits, targets, { reduction: "none" }),
      /target 3 at row 1 is out of range \[0, 3\)/,
    );
    assert.throws(
      () => F.crossEntropy(logits, targets, { reduction: "avg" as F.Reduction }),
      /reduction must be "mean", "sum" or "none", got "avg"/,
    );
    assert.throws(
      () => F.crossEntropy(logits, targets, { labelSmoothing: 1.5 }),
      /labelSmoothing must be in \[0, 1\], got 1.5/,
    );
    assert.throws(
      () =>
        F.binaryCrossEntropyWithLogits(
          logits,
          fromFixture({ shape: [3], dtype: "f32", data: [0, 0, 0] }),
        ),
      /target \[3\] must have the input's shape \[2, 3\]/,
    );
  });
});

Deno.test("crossEntropy with every target ignored: sum and none are 0, mean is NaN (PyTorch)", () => {
  tidy(() => {
    const logits = fromFixture({ shape: [2, 3], dtype: "f32", data: [0, 1, 2, 3, 4, 5] }, true);
    const targets = fromFixture({ shape: [2], dtype: "i32", data: [-100, -100] });
    assert.equal(F.crossEntropy(logits, targets, { reduction: "sum" }).item(), 0);
    const none = F.crossEntropy(logits, targets, { reduction: "none" }).toArray();
    assert.ok(none.length === 2 && none.every((v) => v === 0), `got ${none}`);
    const smoothed = F.crossEntropy(logits, targets, { labelSmoothing: 0.1 });
    assert.ok(Number.isNaN(smoothed.item()));
  });
});
