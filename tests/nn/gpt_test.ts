// nn.GPT against nanoGPT's model.py (tests/fixtures/gpt.json, made by gen_gpt.py): the same
// state-dict keys, logits, loss and every gradient for the same weights and tokens, and three
// AdamW steps with gradient clipping in nanoGPT's parameter groups (configureOptimizers); plus
// generate().
import assert from "node:assert/strict";
import { manualSeed, nn, type Tensor } from "../../mod.ts";
import {
  assertClose,
  type FixtureTensor,
  fromFixture,
  gptFromFixture,
  loadCases,
} from "../_harness/fixtures.ts";

interface GPTCase {
  name: string;
  config: Record<string, number | boolean>;
  stateDict: Record<string, FixtureTensor>;
  idx: FixtureTensor;
  targets: FixtureTensor;
  logits: FixtureTensor;
  loss: number;
  grads: Record<string, FixtureTensor>;
  adamw: {
    lr: number;
    betas: [number, number];
    weightDecay: number;
    clip: number;
    losses: number[];
    gradNorms: number[];
    paramsAfter: Record<string, FixtureTensor>;
  };
}

const TOLERANCE = { rtol: 1e-4, atol: 1e-6 };

function fromNanoGPT(c: GPTCase): nn.GPT {
  return gptFromFixture(c.config, c.stateDict);
}

function lossOf(model: nn.GPT, c: GPTCase): Tensor {
  return model.forward(fromFixture(c.idx), fromFixture(c.targets)).loss;
}

for (const c of loadCases<GPTCase>("gpt.json")) {
  Deno.test(`GPT ${c.name}: state-dict keys, logits, loss and gradients equal nanoGPT's`, () => {
    const model = fromNanoGPT(c);
    assert.deepStrictEqual(Object.keys(model.stateDict()), Object.keys(c.stateDict));
    assert.equal(model.transformer.wte.weight, model.lm_head.weight, "wte and lm_head are tied");
    const { logits, loss } = model.forward(fromFixture(c.idx), fromFixture(c.targets));
    assertClose(logits, c.logits, `${c.name} logits`, TOLERANCE);
    assertClose([loss.item()], [c.loss], `${c.name} loss`, TOLERANCE);
    loss.backward();
    const named = Object.fromEntries(model.namedParameters());
    assert.deepStrictEqual(Object.keys(named), Object.keys(c.grads));
    for (const [name, expected] of Object.entries(c.grads)) {
      assertClose(named[name].grad!, expected, `${c.name} grad of ${name}`, TOLERANCE);
    }
  });

  Deno.test(`GPT ${c.name}: three AdamW steps with gradient clipping equal nanoGPT's`, () => {
    const model = fromNanoGPT(c);
    const { lr, betas, weightDecay, clip } = c.adamw;
    const params = model.parameters();
    const opt = model.configureOptimizers(weightDecay, lr, betas);
    c.adamw.losses.forEach((expectedLoss, step) => {
      const loss = lossOf(model, c);
      assertClose([loss.item()], [expectedLoss], `${c.name} loss before step ${step}`, TOLERANCE);
      loss.backward();
      const norm = nn.utils.clipGradNorm(params, clip);
      assertClose(
        [norm],
        [c.adamw.gradNorms[step]],
        `${c.name} grad norm at step ${step}`,
        TOLERANCE,
      );
      opt.step();
      opt.zeroGrad();
    });
    const named = Object.fromEntries(model.namedParameters());
    const nEmbd = c.config.n_embd as number;
    for (const [name, expected] of Object.entries(c.adamw.paramsAfter)) {
      if (!name.endsWith("attn.c_attn.bias")) {
        assertClose(named[name], expected, `${c.name} ${name} after 3 steps`, TOLERANCE);
        continue;
      }
      // The key bias's gradient is exactly 0 in exact arithmetic (it adds q·b to a whole row of
      // scores, which softmax ignores); both sides hold rounding noise of ~1e-9 there, which
      // Adam's normalisation turns into steps of either sign. Those elements are compared to an
      // absolute bound, the query and value biases at the usual tolerance.
      const got = Array.from(named[name].toArray()), want = expected.data;
      const outside = (i: number) => i < nEmbd || i >= 2 * nEmbd;
      assertClose(
        got.filter((_, i) => outside(i)),
        want.filter((_, i) => outside(i)),
        name,
        TOLERANCE,
      );
      assertClose(got.filter((_, i) => !outside(i)), want.filter((_, i) => !outside(i)), name, {
        rtol: 0,
        atol: 1e-4,
      });
    }
  });
}

Deno.test("GPT.generate continues each row, repeatably under manualSeed, within the vocabulary", () => {
  const model = new nn.GPT({ vocabSize: 11, blockSize: 4, nLayer: 1, nHead: 2, nEmbd: 8 }).eval();
  const prompt = fromFixture({ shape: [2, 3], dtype: "i32", data: [1, 2, 3, 4, 5, 6] });
  manualSeed(7);
  const a = model.generate(prompt, 6, { temperature: 0.8, topK: 3 });
  manualSeed(7);
  const b = model.generate(prompt, 6, { temperature: 0.8, topK: 3 });
  assert.deepStrictEqual(a.shape, [2, 9]);
  assert.deepStrictEqual(Array.from(a.toArray()), Array.from(b.toArray()));
  const tokens = Array.from(a.toArray());
  assert.deepStrictEqual(tokens.slice(0, 3), [1, 2, 3]);
  assert.ok(tokens.every((t) => t >= 0 && t < 11));
});

Deno.test("GPT.generate with topK 1 is greedy: the argmax of the last position's logits", () => {
  const model = new nn.GPT({ vocabSize: 7, blockSize: 8, nLayer: 1, nHead: 1, nEmbd: 4 }).eval();
  const prompt = fromFixture({ shape: [1, 2], dtype: "i32", data: [3, 1] });
  const out = Array.from(model.generate(prompt, 1, { topK: 1 }).toArray());
  const logits = Array.from(model.forward(prompt).logits.select(1, -1).toArray());
  assert.equal(out[2], logits.indexOf(Math.max(...logits)));
});

Deno.test("GPT refuses bad configs and inputs, naming them", () => {
  const ok = { vocabSize: 8, blockSize: 4, nLayer: 1, nHead: 2, nEmbd: 8 };
  assert.throws(() => new nn.GPT({ ...ok, nHead: 3 }), /nEmbd 8 is not divisible by nHead 3/);
  assert.throws(() => new nn.GPT({ ...ok, nLayer: 0 }), /nLayer must be a positive integer, got 0/);
  const model = new nn.GPT(ok);
  const long = fromFixture({ shape: [1, 5], dtype: "i32", data: [0, 1, 2, 3, 4] });
  assert.throws(() => model.forward(long), /length 5, block size is only 4/);
  assert.throws(() => model.forward(long.to("f32")), /expected i32 tokens/);
});

Deno.test("GPT's initialisation follows nanoGPT: N(0, 0.02), scaled c_proj, zero biases", () => {
  manualSeed(0);
  const model = new nn.GPT({ vocabSize: 256, blockSize: 64, nLayer: 4, nHead: 4, nEmbd: 64 });
  const std = (t: Tensor) => {
    const a = Array.from(t.toArray());
    const m = a.reduce((s, x) => s + x, 0) / a.length;
    return Math.sqrt(a.reduce((s, x) => s + (x - m) ** 2, 0) / a.length);
  };
  const named = Object.fromEntries(model.namedParameters());
  assert.ok(Math.abs(std(named["transformer.wte.weight"]) - 0.02) < 0.001);
  assert.ok(Math.abs(std(named["transformer.h.0.mlp.c_fc.weight"]) - 0.02) < 0.001);
  const scaled = 0.02 / Math.sqrt(8);
  assert.ok(Math.abs(std(named["transformer.h.3.attn.c_proj.weight"]) - scaled) < 0.001);
  assert.ok(named["transformer.h.0.attn.c_attn.bias"].toArray().every((x) => x === 0));
  assert.ok(named["transformer.ln_f.weight"].toArray().every((x) => x === 1));
});
