/**
 * `cosineWithWarmup` with `warmup: "nanogpt"` against nanoGPT's own `get_lr` (nanogpt_lr.json,
 * from gen_nanogpt_lr.py), as a function and through the CosineWithWarmup scheduler.
 * @module
 */

import assert from "node:assert/strict";
import { nn, optim, tensor, tidy } from "../../mod.ts";
import { assertClose, loadCases } from "../_harness/fixtures.ts";

interface NanoGptCase {
  name: string;
  args: { learningRate: number; warmupIters: number; lrDecayIters: number; minLr: number };
  its: number[];
  lrs: number[];
}

const cases = loadCases<NanoGptCase>("nanogpt_lr.json");

/** Fails unless each rate is within 1e-12 of nanoGPT's, relatively (so 0 must be exactly 0). */
function assertRates(actual: number[], expected: number[], what: string): void {
  assert.equal(actual.length, expected.length, `${what}: count`);
  actual.forEach((lr, i) => {
    const error = Math.abs(lr - expected[i]);
    assert.ok(error <= 1e-12 * Math.abs(expected[i]), `${what}[${i}]: ${lr} vs ${expected[i]}`);
  });
}

/** The options that give nanoGPT's schedule for a case. */
function optionsOf(c: NanoGptCase): optim.CosineWithWarmupOptions {
  return {
    warmupSteps: c.args.warmupIters,
    totalSteps: c.args.lrDecayIters,
    minLr: c.args.minLr,
    warmup: "nanogpt",
  };
}

Deno.test("cosineWithWarmup with warmup 'nanogpt' gives nanoGPT's get_lr at every listed iteration", () => {
  assert.deepEqual(cases.map((c) => c.name), [
    "train_py_defaults",
    "shakespeare_char",
    "short",
    "no_warmup",
  ]);
  for (const c of cases) {
    const actual = c.its.map((it) => optim.cosineWithWarmup(it, c.args.learningRate, optionsOf(c)));
    assertRates(actual, c.lrs, c.name);
  }
});

Deno.test("the default 'linear' warm-up differs from nanoGPT's only while warming up", () => {
  for (const c of cases) {
    const { warmup: _, ...linear } = optionsOf(c);
    c.its.forEach((it, i) => {
      const lr = optim.cosineWithWarmup(it, c.args.learningRate, linear);
      if (it < c.args.warmupIters) {
        assertClose([lr], [(c.args.learningRate * (it + 1)) / c.args.warmupIters], `${c.name}`);
        assert.ok(lr > c.lrs[i], `${c.name} it ${it}: linear ${lr} above nanoGPT's ${c.lrs[i]}`);
      } else {
        assert.equal(lr, c.lrs[i], `${c.name} it ${it}`);
      }
    });
  }
});

Deno.test("CosineWithWarmup with warmup 'nanogpt' sets nanoGPT's rate before each optimizer step", () => {
  const c = cases.find((c) => c.name === "short")!;
  assert.deepEqual(c.its, c.its.map((_, i) => i), "the short case lists every iteration");
  tidy(() => {
    const p = new nn.Parameter(tensor([1, 2]));
    const opt = new optim.AdamW([p], { lr: c.args.learningRate });
    const scheduler = new optim.CosineWithWarmup(opt, optionsOf(c));
    for (const [it, lr] of c.lrs.entries()) {
      assertRates([opt.paramGroups[0].lr], [lr], `${c.name}: lr at iteration ${it}`);
      assert.deepEqual(scheduler.getLastLr(), [opt.paramGroups[0].lr]);
      opt.step();
      scheduler.step();
    }
  });
});

Deno.test("cosineWithWarmup refuses an unknown warm-up formula, naming it", () => {
  const options = { warmupSteps: 2, totalSteps: 10, warmup: "cosine" as "linear" };
  assert.throws(
    () => optim.cosineWithWarmup(0, 0.1, options),
    new RangeError('cosineWithWarmup: warmup must be "linear" or "nanogpt", got "cosine"'),
  );
  tidy(() => {
    const opt = new optim.SGD(new nn.Linear(2, 1).parameters(), { lr: 0.1 });
    assert.throws(() => new optim.CosineWithWarmup(opt, options), RangeError);
  });
});
