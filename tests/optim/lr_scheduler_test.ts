/**
 * The cosine-with-linear-warmup schedule against PyTorch's LambdaLR (optim.json), and
 * CosineWithWarmup driving an optimizer, also across a state-dict round trip.
 * @module
 */

import assert from "node:assert/strict";
import { nn, optim, tidy } from "../../mod.ts";
import { assertClose, fromFixture, loadCases } from "../_harness/fixtures.ts";

interface ScheduleCase {
  name: string;
  op: "cosineWithWarmup";
  args: { baseLr: number; warmupSteps: number; totalSteps: number; minLr: number };
  lrAtStep: number[];
}

const schedule = loadCases<{ op: string }>("optim.json").find((c): c is ScheduleCase =>
  c.op === "cosineWithWarmup"
);

Deno.test("cosineWithWarmup gives PyTorch's learning rate at every step", () => {
  assert.ok(schedule, "optim.json has a cosineWithWarmup case");
  const { baseLr, ...options } = schedule.args;
  assert.equal(schedule.lrAtStep.length, options.totalSteps + 1);
  schedule.lrAtStep.forEach((lr, step) => {
    assertClose([optim.cosineWithWarmup(step, baseLr, options)], [lr], `lr at step ${step}`, {
      rtol: 1e-12,
      atol: 0,
    });
  });
  assert.equal(optim.cosineWithWarmup(options.totalSteps + 5, baseLr, options), options.minLr);
});

Deno.test("CosineWithWarmup sets the optimizer's lr for each step", () => {
  assert.ok(schedule);
  tidy(() => {
    const { baseLr, ...options } = schedule.args;
    const p = new nn.Parameter(fromFixture({ shape: [2], dtype: "f32", data: [1, 2] }));
    const opt = new optim.SGD([p], { lr: baseLr });
    const scheduler = new optim.CosineWithWarmup(opt, options);
    schedule.lrAtStep.forEach((lr, step) => {
      assertClose(scheduler.getLastLr(), [lr], `lr after ${step} scheduler steps`, {
        rtol: 1e-12,
        atol: 0,
      });
      opt.step();
      scheduler.step();
    });
  });
});

Deno.test("CosineWithWarmup built after optimizer.loadStateDict decays from the original lr (initialLr)", () => {
  tidy(() => {
    const options = { warmupSteps: 2, totalSteps: 10 };
    const p = new nn.Parameter(fromFixture({ shape: [2], dtype: "f32", data: [1, 2] }));
    const opt = new optim.SGD([p], { lr: 0.1 });
    const scheduler = new optim.CosineWithWarmup(opt, options);
    for (let step = 0; step < 4; step++) scheduler.step();
    const saved = opt.stateDict();
    const group = saved.paramGroups[0] as { lr: number; initialLr?: number };
    assert.equal(group.initialLr, 0.1, "initialLr travels in the state dict");
    assert.ok(group.lr < 0.1);

    const resumed = new optim.SGD([p], { lr: 0.1 });
    resumed.loadStateDict(saved);
    const again = new optim.CosineWithWarmup(resumed, options);
    again.loadStateDict(scheduler.stateDict());
    assert.deepEqual(again.getLastLr(), scheduler.getLastLr());
    scheduler.step();
    again.step();
    assert.deepEqual(again.getLastLr(), scheduler.getLastLr());
    assert.equal(again.getLastLr()[0], optim.cosineWithWarmup(5, 0.1, options));
  });
});
