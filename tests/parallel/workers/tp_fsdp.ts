/**
 * Worker for tp_fsdp_test.ts, on 4 ranks as a 2 (dp) × 2 (tp) mesh: for each CASES entry, the
 * tiny GPT made tensor-parallel on the tp dimension, optionally activation-checkpointed, then
 * fully sharded per block and on the root across the dp dimension (torchtitan's order), and
 * trained for STEPS clipped AdamW steps, each dp rank on its half of every batch: losses,
 * first-step gradient shards, clipped norms, final weight shards and what each parameter holds
 * (tp_problem's trainCase).
 * @module
 */

import {
  destroyProcessGroup,
  initDeviceMesh,
  initProcessGroup,
} from "../../../src/distributed/mod.ts";
import { runWorker } from "../../_harness/worker.ts";
import { type Case, trainCase } from "./tp_problem.ts";

await runWorker(async () => {
  await initProcessGroup({ backend: "gloo", timeoutMs: 20_000 });
  try {
    const mesh = await initDeviceMesh("cpu", [2, 2], { meshDimNames: ["dp", "tp"] });
    const [dp, tp] = mesh.getCoordinate();
    const results = [];
    for (const c of JSON.parse(Deno.env.get("CASES")!) as Case[]) {
      results.push(await trainCase(c, mesh.get("tp"), mesh.get("dp"), dp, 2));
    }
    return { dp, tp, results };
  } finally {
    await destroyProcessGroup();
  }
});
