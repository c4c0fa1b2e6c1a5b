// 3-D parallelism's pieces in one process: clipGradNorm's sumAcross and alsoScale,
// parallelizeGPT on split stages (the plan skips what a stage lacks), parallelizePipelineGPT's
// checks, and parallelizePipelineGPT on a 1 × 1 × 1 mesh (a one-stage GPipe on a world of one:
// size-1 TP and FSDP are left out) training the GPT like the whole model on the whole batch,
// clipped.
import assert from "node:assert/strict";
import {
  destroyProcessGroup,
  initDeviceMesh,
  initProcessGroup,
} from "../../src/distributed/mod.ts";
import { Parameter } from "../../src/nn/parameter.ts";
import { clipGradNorm } from "../../src/nn/utils/clip_grad.ts";
import * as parallel from "../../src/parallel/mod.ts";
import { tensor } from "../../src/tensor/creation.ts";
import { relativeError } from "../_harness/close.ts";
import { batch, buildModel, buildOptimizer, GPT_CONFIG } from "./workers/tp_problem.ts";
import { keyBiasApart } from "./_tp_compare.ts";
import { crossEntropy } from "../../src/tensor/ops/cross_entropy.ts";
import type { Tensor } from "../../src/tensor/tensor.ts";

const gptLoss = (logits: Tensor, targets: Tensor) =>
  crossEntropy(logits.reshape([-1, GPT_CONFIG.vocabSize]), targets.reshape([-1]));

Deno.test("clipGradNorm: sumAcross adds the other ranks' power sums, alsoScale scales uncounted copies", () => {
  const p = new Parameter(tensor([0, 0])), copy = new Parameter(tensor([0]));
  p.grad = tensor([3, 4]);
  copy.grad = tensor([12]);
  const seen: number[] = [];
  const total = clipGradNorm([p], 1, 2, {
    sumAcross: (partial) => (seen.push(partial), [partial, 11]),
    alsoScale: [copy],
  });
  assert.deepEqual(seen, [25], "called once, with this rank's sum of squares");
  assert.equal(total, 6);
  const c = 1 / (6 + 1e-6);
  assert.ok(relativeError(p.grad.toArray(), [3 * c, 4 * c]) < 1e-6);
  assert.ok(relativeError(copy.grad.toArray(), [12 * c]) < 1e-6);
  assert.throws(() => parallel.clipGradNormPipeline([], 1), /expected this rank's pipeline stages/);
});

Deno.test("one process: parallelizeGPT on split stages, parallelizePipelineGPT on a 1 × 1 × 1 mesh trains like the whole model", async () => {
  await initProcessGroup({ initMethod: "tcp://127.0.0.1:0", rank: 0, worldSize: 1 });
  try {
    const mesh = await initDeviceMesh("cpu", [1, 1, 1], { meshDimNames: ["pp", "dp_shard", "tp"] });
    // A middle stage has neither embeddings nor head: the plan's entries for them are skipped.
    const whole = buildModel();
    const [x, y] = batch(0, false, 2);
    const want = whole.forward(x, y).logits; // with targets: every position's logits
    const stages = [0, 1].map((s) =>
      parallel.parallelizeGPT(parallel.splitGPT(whole, s, 2), mesh.get("tp"))
    );
    assert.ok(
      relativeError(stages[1].forward(stages[0].forward(x)).toArray(), want.toArray()) < 1e-6,
    );
    const dims = await initDeviceMesh("cpu", [1, 1], { meshDimNames: ["pp", "dp"] });
    assert.throws(
      () =>
        parallel.parallelizePipelineGPT(buildModel(), dims, { nMicrobatches: 1, lossFn: gptLoss }),
      /dimensions must be "pp" and any of "dp_replicate", "dp_shard", "tp", got \(pp, dp\)/,
    );
    assert.throws(
      () =>
        parallel.parallelizePipelineGPT(buildModel(), mesh, {
          nMicrobatches: 1,
          lossFn: gptLoss,
          schedule: "zb" as "gpipe",
        }),
      /schedule must be "gpipe", "1f1b" or "interleaved", got zb/,
    );
    // GPipe over 2 microbatches on a world of one, against the whole model.
    const reference = buildModel(), refOpt = buildOptimizer(reference.parameters());
    const p = parallel.parallelizePipelineGPT(buildModel(), mesh, {
      schedule: "gpipe",
      nMicrobatches: 2,
      lossFn: gptLoss,
    });
    const opt = buildOptimizer(p.parameters());
    for (let step = 0; step < 2; step++) {
      const [x, y] = batch(step, false, 4);
      const { loss } = reference.forward(x, y);
      loss.backward();
      const wantNorm = clipGradNorm(reference.parameters(), 0.5);
      refOpt.step();
      refOpt.zeroGrad();
      const losses: Tensor[] = [];
      await p.schedule.step(x, { target: y, losses });
      const got = (losses[0].item() + losses[1].item()) / 2;
      assert.ok(Math.abs(got - loss.item()) <= 1e-5 * loss.item(), `loss ${got} vs ${loss.item()}`);
      const norm = parallel.clipGradNormPipeline(p.stages, 0.5);
      assert.ok(Math.abs(norm - wantNorm) <= 1e-5 * wantNorm, `norm ${norm} vs ${wantNorm}`);
      opt.step();
      opt.zeroGrad();
    }
    const final = Object.fromEntries(reference.namedParameters());
    for (const [name, param] of p.modules[0].namedParameters()) {
      let got = Array.from(param.toArray()), want = Array.from(final[name].toArray());
      if (name.endsWith("attn.c_attn.bias")) {
        // The key bias's gradient is zero: its AdamW steps are noise (see _tp_compare.ts).
        got = keyBiasApart(got, 0, got.length, name);
        want = keyBiasApart(want, 0, want.length, "reference");
      }
      const err = relativeError(got, want);
      assert.ok(err <= 1e-5, `${name}: relative error ${err}`);
    }
  } finally {
    await destroyProcessGroup();
  }
});
