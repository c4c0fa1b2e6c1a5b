// Pipeline stages in one process: splitGPT's stages (names, the tie, the chained forward, bad
// splits), PipelineStage's placement checks, and a schedule running all of a GPT's stages on a
// world of one (Interleaved1F1B with 4 stages on the rank, and GPipe with one) trained like the
// whole model on the whole batch.
import assert from "node:assert/strict";
import { destroyProcessGroup, initProcessGroup } from "../../src/distributed/mod.ts";
import * as parallel from "../../src/parallel/mod.ts";
import { noGrad } from "../../src/tensor/autograd.ts";
import { Parameter } from "../../src/nn/parameter.ts";
import { Module } from "../../src/nn/module.ts";
import { Linear } from "../../src/nn/layers.ts";
import { tensor } from "../../src/tensor/creation.ts";
import { relativeError } from "../_harness/close.ts";
import type { Tensor } from "../../src/tensor/tensor.ts";
import { tiedParameter, tiedParameters } from "../../src/parallel/pipelining/tied.ts";
import {
  assertSame,
  batch,
  buildModel,
  gptLoss,
  MICROBATCHES,
  trainPipelined,
  trainWhole,
} from "./workers/pipeline_problem.ts";

Deno.test("splitGPT: the stages hold the whole model's parameters under its names, and chained they compute its logits", () => {
  const model = buildModel();
  const whole = Object.keys(model.stateDict());
  const stages = [0, 1, 2, 3].map((s) => parallel.splitGPT(model, s, 4));
  const names = stages.map((s) => Object.keys(s.stateDict()));
  assert.ok(names[0].includes("transformer.wte.weight") && !names[0].includes("lm_head.weight"));
  assert.ok(names[3].includes("lm_head.weight") && names[3].includes("transformer.ln_f.weight"));
  assert.ok(names[1].every((n) => /^transformer\.h\.[23]\./.test(n)), `${names[1]}`);
  const all = names.flat();
  assert.equal(new Set(all).size, all.length, "each name on one stage");
  assert.deepEqual([...all].sort(), [...whole].sort());
  assert.equal(stages[0].transformer.get("wte"), model.transformer.wte, "shared, not copied");
  const [x, y] = batch(0);
  noGrad(() => {
    let h = x;
    for (const s of stages) h = s.forward(h);
    const want = model.forward(x, y).logits;
    assert.deepEqual(h.toArray(), want.toArray());
  });
  // The tie is recorded on the first and last stage only, and only while the model has it.
  assert.deepEqual(stages.map((s) => tiedParameters(s).length), [1, 0, 0, 1]);
  assert.equal(
    tiedParameter(stages[3], tiedParameters(stages[3])[0]),
    model.transformer.wte.weight,
  );
  assert.equal(
    tiedParameter(stages[0], tiedParameters(stages[0])[0]),
    model.transformer.wte.weight,
  );
  const untied = buildModel();
  untied.lm_head.weight = new Parameter(untied.lm_head.weight.detach().clone());
  assert.equal(tiedParameters(parallel.splitGPT(untied, 1, 2)).length, 0);
  const uneven = parallel.splitGPT(model, 0, 2, { layersPerStage: [1, 7] });
  assert.deepEqual(
    Object.keys(uneven.stateDict()).filter((n) => n.endsWith("ln_1.weight")),
    ["transformer.h.0.ln_1.weight"],
  );
});

Deno.test("splitGPT refuses bad splits, naming the value", () => {
  const model = buildModel();
  assert.throws(
    () => parallel.splitGPT(model, 2, 2),
    /stageIndex must be an integer in \[0, 2\), got 2/,
  );
  assert.throws(() => parallel.splitGPT(model, 0, 9), /9 stages for 8 blocks; give layersPerStage/);
  assert.throws(
    () => parallel.splitGPT(model, 0, 2, { layersPerStage: [4, 3] }),
    /layersPerStage must be 2 non-negative integers adding up to nLayer 8, got \[4, 3\]/,
  );
  assert.throws(
    () => parallel.splitGPT(model, 0, 3, { layersPerStage: [4, 0, 4] }),
    /leaves stage 1 with no layer/,
  );
});

Deno.test("one process: Interleaved1F1B over 4 stages and GPipe over 1 train the GPT like the whole model on the whole batch", async () => {
  await initProcessGroup({ initMethod: "tcp://127.0.0.1:0", rank: 0, worldSize: 1 });
  try {
    assert.throws(
      () => new parallel.PipelineStage(buildModel(), 2, 2),
      /PipelineStage: stageIndex must be an integer in \[0, 2\), got 2/,
    );
    const want = trainWhole();
    const model = buildModel();
    const modules = [0, 1, 2, 3].map((s) => parallel.splitGPT(model, s, 4));
    const stages = modules.map((m, s) => new parallel.PipelineStage(m, s, 4));
    const interleaved = new parallel.ScheduleInterleaved1F1B(stages, MICROBATCHES, gptLoss);
    const got = await trainPipelined(modules, interleaved, true, true);
    assertSame(got, want, "interleaved");
    assert.deepEqual(Object.keys(got.final).sort(), Object.keys(want.final).sort());
    assert.equal(got.losses.length, 3);
    const one = parallel.splitGPT(buildModel(), 0, 1);
    const gpipe = new parallel.ScheduleGPipe(new parallel.PipelineStage(one, 0, 1), 8, gptLoss);
    assertSame(await trainPipelined([one], gpipe, true, true), want, "gpipe");
    assert.throws(
      () => new parallel.Schedule1F1B(stages[0], 8, gptLoss),
      /Schedule1F1B: runs one stage per rank, but the pipeline has 4 stages on 1 ranks/,
    );
    await assert.rejects(() => gpipe.step(undefined, {}), /stage 0 needs the input batch/);
    // scaleGrads: false leaves the sum of the microbatches' gradients (PyTorch's scale_grads).
    const summed = parallel.splitGPT(buildModel(), 0, 1);
    const unscaled = new parallel.ScheduleGPipe(
      new parallel.PipelineStage(summed, 0, 1),
      MICROBATCHES,
      gptLoss,
      { scaleGrads: false },
    );
    const [x0, y0] = batch(0);
    await unscaled.step(x0, { target: y0 });
    const name = "transformer.h.3.mlp.c_fc.weight";
    const sum = Array.from(summed.stateDict()[name].grad!.toArray());
    const err = relativeError(sum, want.grads[name].map((g) => g * MICROBATCHES));
    assert.ok(err <= 1e-5, `unscaled gradient: relative error ${err}`);
    // A stage that ignores its input would leave the one before it waiting for a gradient.
    class Constant extends Module {
      w = new Parameter(tensor([1, 2], [1, 2]));
      forward(): Tensor {
        return this.w.mul(1);
      }
    }
    const pair = [new Linear(2, 2), new Constant()].map((m, s) =>
      new parallel.PipelineStage(m, s, 2)
    );
    const ignoring = new parallel.ScheduleInterleaved1F1B(pair, 1, (y, t) => y.sub(t).sum());
    await assert.rejects(
      () => ignoring.step(tensor([1, 1], [1, 2]), { target: tensor([0, 0], [1, 2]) }),
      /stage 1 on rank 0 failed at 1B0: PipelineStage 1: its output of microbatch 0 does not depend on its input/,
    );
    const [x] = batch(0);
    await assert.rejects(() => gpipe.step(x, {}), /the last stage needs options.target/);
    await assert.rejects(
      () =>
        new parallel.ScheduleGPipe(new parallel.PipelineStage(one, 0, 1), 9, gptLoss).step(x, {
          target: x,
        }),
      /input \[8,8\] has 8 rows on dimension 0, fewer than the 9 microbatches/,
    );
  } finally {
    await destroyProcessGroup();
  }
});
