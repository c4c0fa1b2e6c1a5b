/**
 * Worker for tp_fsdp_test.ts, on 4 ranks as a 2 (dp) × 2 (tp) mesh: for each CASES entry, the
 * tiny GPT made tensor-parallel on the tp dimension, optionally activation-checkpointed, then
 * fully sharded per block and on the root across the dp dimension (torchtitan's order), and
 * trained for STEPS clipped AdamW steps, each dp rank on its half of every batch: losses,
 * first-step gradient shards, clipped norms, final weight shards and what each parameter holds.
 * @module
 */

import { destroyProcessGroup, initDeviceMesh, initProcessGroup } from "../../../src/dist/mod.ts";
import * as parallel from "../../../src/parallel/mod.ts";
import { runWorker } from "../../_harness/worker.ts";
import { buildModel, placements, trainParts } from "./tp_problem.ts";

/** One scenario: sequence parallelism on the tp dimension, full activation checkpointing. */
export interface Case {
  label: string;
  sequenceParallel: boolean;
  ac: boolean;
}

await runWorker(async () => {
  await initProcessGroup({ backend: "gloo", timeoutMs: 20_000 });
  try {
    const mesh = await initDeviceMesh("cpu", [2, 2], { meshDimNames: ["dp", "tp"] });
    const [dp, tp] = mesh.getCoordinate();
    const cases = JSON.parse(Deno.env.get("CASES")!) as Case[];
    const results = [];
    for (const c of cases) {
      const started = performance.now();
      const model = parallel.parallelizeGPT(buildModel(), mesh.get("tp"), {
        sequenceParallel: c.sequenceParallel,
      });
      const wrapped = c.ac ? parallel.applyActivationCheckpointing(model, { mode: "full" }) : [];
      for (const block of model.transformer.h) parallel.fullyShard(block, { mesh: mesh.get("dp") });
      const sharded = parallel.fullyShard(model, { mesh: mesh.get("dp") });
      const trace = await trainParts(model, dp, 2, (loss) => sharded.backward(loss));
      results.push({
        ...trace,
        wrapped,
        placements: placements(model),
        ms: performance.now() - started,
      });
    }
    return { dp, tp, results };
  } finally {
    await destroyProcessGroup();
  }
});
