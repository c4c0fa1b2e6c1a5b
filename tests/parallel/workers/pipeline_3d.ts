/**
 * Worker for pipeline_3d_test.ts, on 8 ranks as a 2 (pp) × 2 (dp_shard) × 2 (tp) mesh: for each
 * CASES entry, tp_problem's tiny GPT split into 2 stages by parallelizePipelineGPT (TP, then
 * optionally full activation checkpointing, then FSDP per block and on the stage root), trained
 * for STEPS clipped AdamW steps on this dp rank's half of every batch of ROWS sequences, cut into
 * MICROBATCHES: losses (last stage), first-step gradient shards, clipped norms, final weight
 * shards and what each parameter holds, by the whole model's names.
 * @module
 */

import {
  destroyProcessGroup,
  type DeviceMesh,
  initDeviceMesh,
  initProcessGroup,
} from "../../../src/distributed/mod.ts";
import type { Module } from "../../../src/nn/module.ts";
import * as parallel from "../../../src/parallel/mod.ts";
import { crossEntropy } from "../../../src/tensor/ops/cross_entropy.ts";
import { tidyAsync } from "../../../src/tensor/scope.ts";
import type { Tensor } from "../../../src/tensor/tensor.ts";
import { runWorker } from "../../_harness/worker.ts";
import { type Case3D, MICROBATCHES, ROWS } from "./pipeline_3d_problem.ts";
import {
  batch,
  buildModel,
  buildOptimizer,
  CLIP,
  GPT_CONFIG,
  placements,
  STEPS,
  type Trace,
} from "./tp_problem.ts";

function gptLoss(logits: Tensor, targets: Tensor): Tensor {
  return crossEntropy(logits.reshape([-1, GPT_CONFIG.vocabSize]), targets.reshape([-1]));
}

function values(modules: Module[], grad: boolean): Record<string, number[]> {
  return Object.fromEntries(
    modules.flatMap((m) => [...m.namedParameters()]).map((
      [k, p],
    ) => [k, Array.from((grad ? p.grad! : p).toArray())]),
  );
}

async function trainCase(c: Case3D, mesh: DeviceMesh) {
  const started = performance.now();
  const [, dp] = mesh.getCoordinate();
  const p = parallel.parallelizePipelineGPT(buildModel(), mesh, {
    schedule: c.schedule,
    nMicrobatches: MICROBATCHES,
    lossFn: gptLoss,
    ac: c.ac ? { mode: "full" } : undefined,
    layersPerStage: c.layersPerStage,
  });
  const optimizer = buildOptimizer(p.parameters());
  const trace: Trace = { losses: [], grads: {}, norms: [], final: {} };
  const rows = ROWS / 2;
  for (let step = 0; step < STEPS; step++) {
    await tidyAsync(async () => {
      const [x, y] = batch(step, false, ROWS);
      const mine = (t: Tensor) => t.narrow(0, dp * rows, rows).contiguous();
      const losses: Tensor[] = [];
      await p.schedule.step(
        p.holdsFirst ? mine(x) : undefined,
        p.holdsLast ? { target: mine(y), losses } : {},
      );
      if (p.holdsLast) trace.losses.push(losses.reduce((s, l) => s + l.item(), 0) / losses.length);
      if (step === 0) trace.grads = values(p.modules, true);
      trace.norms.push(parallel.clipGradNormPipeline(p.stages, CLIP));
      optimizer.step();
      optimizer.zeroGrad();
    });
  }
  trace.final = values(p.modules, false);
  const held = Object.assign({}, ...p.modules.map((m) => placements(m)));
  // The reduce-scatters of the last step: one per FSDP group (each block, the stage root), not
  // one per group and microbatch (see [Note: FSDP inside a schedule]).
  const reduceScatters = p.modules.map((m) =>
    (m as unknown as parallel.FSDPModule).lastStats.reduceScatters
  );
  // A root's group holds what its blocks do not: nothing on a middle stage (then no collective).
  const fsdpGroups = p.modules.map((m) =>
    [...m.transformer.get("h").children()].length +
    ([...m.namedParameters()].some(([n]) => !n.startsWith("transformer.h.")) ? 1 : 0)
  );
  return {
    ...trace,
    placements: held,
    reduceScatters,
    fsdpGroups,
    ms: performance.now() - started,
  };
}

await runWorker(async () => {
  await initProcessGroup({ backend: "gloo", timeoutMs: 30_000 });
  try {
    const mesh = await initDeviceMesh("cpu", [2, 2, 2], {
      meshDimNames: ["pp", "dp_shard", "tp"],
    });
    const [pp, dp, tp] = mesh.getCoordinate();
    const results = [];
    for (const c of JSON.parse(Deno.env.get("CASES")!) as Case3D[]) {
      results.push(await trainCase(c, mesh));
    }
    return { pp, dp, tp, results };
  } finally {
    await destroyProcessGroup();
  }
});
