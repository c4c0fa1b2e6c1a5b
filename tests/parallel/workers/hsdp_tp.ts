/**
 * Worker for hsdp_tp_test.ts, on 8 ranks as a 2 (dp_replicate) × 2 (dp_shard) × 2 (tp) mesh: for
 * each CASES entry, the tiny GPT made tensor-parallel on tp, optionally activation-checkpointed,
 * then fully sharded per block and on the root over the (dp_replicate, dp_shard) mesh (HSDP), and
 * trained for STEPS clipped AdamW steps, each data-parallel rank on its quarter of every batch of
 * ROWS (env) sequences: losses, first-step gradient shards, clipped norms, final weight shards and
 * what each parameter holds (tp_problem's trainCase).
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
  await initProcessGroup({ backend: "gloo", timeoutMs: 30_000 });
  try {
    const mesh = await initDeviceMesh("cpu", [2, 2, 2], {
      meshDimNames: ["dp_replicate", "dp_shard", "tp"],
    });
    const [replicate, shard, tp] = mesh.getCoordinate();
    // Row-major: the data-parallel index is replicate × 2 + shard.
    const dp = replicate * 2 + shard;
    const dpMesh = mesh.get(["dp_replicate", "dp_shard"]);
    const rows = Number(Deno.env.get("ROWS"));
    const results = [];
    for (const c of JSON.parse(Deno.env.get("CASES")!) as Case[]) {
      results.push(await trainCase(c, mesh.get("tp"), dpMesh, dp, 4, rows));
    }
    return { dp, tp, replicate, shard, results };
  } finally {
    await destroyProcessGroup();
  }
});
