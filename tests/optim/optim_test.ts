/**
 * Adam, PyTorch-style writes to `optimizer.paramGroups`, LambdaLR and StepLR against PyTorch
 * (schedules.json, made by tests/fixtures/gen_fixtures_models.py).
 * @module
 */

import assert from "node:assert/strict";
import { nn, optim, tidy } from "../../mod.ts";
import { assertClose, type FixtureTensor, fromFixture, loadCases } from "../_harness/fixtures.ts";

interface TrajectoryCase {
  name: string;
  op: "Adam" | "AdamW" | "SGD";
  args: Record<string, unknown>;
  params: Record<string, FixtureTensor>;
  steps: { grads: Record<string, FixtureTensor>; params: Record<string, FixtureTensor> }[];
  writes?: { step: number; set: Record<string, unknown> }[];
}

interface SchedulerCase {
  name: string;
  op: "LambdaLR" | "StepLR";
  args: { baseLrs: number[]; lambda?: string; stepSize?: number; gamma?: number };
  lrAtStep: number[][];
}

const cases = loadCases<TrajectoryCase | SchedulerCase>("schedules.json");

function makeOptimizer(op: string, params: nn.Parameter[], args: Record<string, unknown>) {
  if (op === "Adam") return new optim.Adam(params, args);
  if (op === "AdamW") return new optim.AdamW(params, args);
  if (op === "SGD") return new optim.SGD(params, args as unknown as optim.SGDOptions);
  throw new Error(`unknown optimizer "${op}" in the fixture`);
}

const isScheduler = (c: TrajectoryCase | SchedulerCase): c is SchedulerCase =>
  c.op === "LambdaLR" || c.op === "StepLR";

for (const c of cases.filter((c): c is TrajectoryCase => !isScheduler(c))) {
  const writes = c.writes ?? [];
  const how = writes.length ? ", with paramGroups[0] writes between steps" : "";
  Deno.test(`${c.op} follows PyTorch's trajectory for 5 steps${how}: ${c.name}`, () => {
    tidy(() => {
      const params: Record<string, nn.Parameter> = {};
      for (const [name, t] of Object.entries(c.params)) {
        params[name] = new nn.Parameter(fromFixture(t));
      }
      const opt = makeOptimizer(c.op, Object.values(params), c.args);
      assert.equal(c.steps.length, 5);
      c.steps.forEach((step, i) => {
        for (const w of writes.filter((w) => w.step === i)) {
          Object.assign(opt.paramGroups[0], w.set);
        }
        opt.zeroGrad();
        for (const [name, g] of Object.entries(step.grads)) params[name].grad = fromFixture(g);
        opt.step();
        for (const [name, expected] of Object.entries(step.params)) {
          assertClose(params[name], expected, `${c.name} step ${i + 1} ${name}`);
        }
      });
    });
  });
}

/** The fixture's lambdas (gen_fixtures_models.py's LAMBDAS), by name. */
const LAMBDAS: Record<string, (epoch: number) => number> = {
  "exponential0.9": (s) => 0.9 ** s,
  "warmup3_inverseSqrt": (s) => Math.min((s + 1) / 3, 1 / Math.sqrt(Math.max(s - 1, 1))),
};

for (const c of cases.filter(isScheduler)) {
  Deno.test(`${c.op} sets PyTorch's rate in both groups at every step: ${c.name}`, () => {
    tidy(() => {
      const groups = c.args.baseLrs.map((lr) => ({
        params: [new nn.Parameter(fromFixture({ shape: [1], dtype: "f32", data: [0] }))],
        lr,
      }));
      const opt = new optim.SGD(groups, { lr: 1 });
      const scheduler = c.op === "LambdaLR"
        ? new optim.LambdaLR(opt, LAMBDAS[c.args.lambda!])
        : new optim.StepLR(opt, { stepSize: c.args.stepSize!, gamma: c.args.gamma });
      c.lrAtStep.forEach((lrs, step) => {
        const what = `${c.name} after ${step} scheduler steps`;
        assertClose(scheduler.getLastLr(), lrs, what, { rtol: 1e-12, atol: 0 });
        assertClose(opt.paramGroups.map((g) => g.lr), lrs, what, { rtol: 1e-12, atol: 0 });
        opt.step();
        scheduler.step();
      });
    });
  });
}

Deno.test("a scheduler restored from its state dict on a resumed optimizer continues the schedule", () => {
  tidy(() => {
    const p = new nn.Parameter(fromFixture({ shape: [2], dtype: "f32", data: [1, 2] }));
    const opt = new optim.Adam([p], { lr: 0.1 });
    const scheduler = new optim.StepLR(opt, { stepSize: 2, gamma: 0.5 });
    for (let i = 0; i < 5; i++) scheduler.step();
    assert.deepEqual(scheduler.getLastLr(), [0.025]);

    const resumed = new optim.Adam([p], { lr: 0.1 });
    resumed.loadStateDict(opt.stateDict());
    const again = new optim.StepLR(resumed, { stepSize: 2, gamma: 0.5 });
    again.loadStateDict(JSON.parse(JSON.stringify(scheduler.stateDict())));
    assert.deepEqual(again.getLastLr(), [0.025]);
    assert.equal(resumed.paramGroups[0].lr, 0.025);
    again.step();
    assert.deepEqual(again.getLastLr(), [0.0125]);
  });
});

Deno.test("parameter groups are flat: options live on the group and round-trip the state dict", () => {
  tidy(() => {
    const a = new nn.Parameter(fromFixture({ shape: [2], dtype: "f32", data: [1, 2] }));
    const b = new nn.Parameter(fromFixture({ shape: [1], dtype: "f32", data: [3] }));
    const opt = new optim.AdamW([{ params: [a] }, { params: [b], weightDecay: 0 }], { lr: 0.5 });
    assert.equal(opt.paramGroups[1].weightDecay, 0);
    assert.equal(opt.paramGroups[1].lr, 0.5);
    assert.deepEqual(opt.paramGroups[0].betas, [0.9, 0.999]);
    opt.paramGroups[0].lr = 0.25;
    const saved = opt.stateDict();
    assert.deepEqual(saved.paramGroups.map((g) => [g.lr, g.weightDecay, g.params]), [
      [0.25, 0.01, [0]],
      [0.5, 0, [1]],
    ]);
    const other = new optim.AdamW([{ params: [a] }, { params: [b] }], { lr: 1 });
    other.loadStateDict(saved);
    assert.equal(other.paramGroups[0].lr, 0.25);
    assert.equal(other.paramGroups[1].weightDecay, 0);
    assert.equal(other.paramGroups[0].params[0], a, "the group keeps its own parameters");
  });
});

Deno.test("scheduler and Adam arguments are checked, naming the value", () => {
  tidy(() => {
    const p = new nn.Parameter(fromFixture({ shape: [1], dtype: "f32", data: [0] }));
    assert.throws(() => new optim.Adam([p], { lr: -1 }), /Adam: invalid learning rate: -1/);
    const opt = new optim.SGD([p], { lr: 1 });
    assert.throws(() => new optim.StepLR(opt, { stepSize: 0 }), /stepSize .* got 0/);
    assert.throws(() => new optim.LambdaLR(opt, []), /expected 1 lrLambda functions .* got 0/);
  });
});
