/**
 * Worker for pipeline_agree_test.ts: the tiny GPT split over the world, one stage per rank,
 * where rank ODD_RANK builds its schedule differently from the others (CASE "microbatches": 4
 * microbatches instead of 8; "schedule": 1F1B instead of GPipe), or the last stage's target has
 * twice the input's rows (CASE "rows"). After a barrier, every rank runs one step and reports
 * its error and how long the step took to fail.
 * @module
 */

import {
  barrier,
  destroyProcessGroup,
  getRank,
  getWorldSize,
  initProcessGroup,
} from "../../../src/distributed/mod.ts";
import * as parallel from "../../../src/parallel/mod.ts";
import { cat } from "../../../src/tensor/ops/indexing.ts";
import { runWorker } from "../../_harness/worker.ts";
import { batch, buildModel, gptLoss, MICROBATCHES } from "./pipeline_problem.ts";

await runWorker(async () => {
  await initProcessGroup({ timeoutMs: Number(Deno.env.get("TEST_TIMEOUT_MS") ?? 20_000) });
  try {
    const world = getWorldSize(), rank = getRank(), kase = Deno.env.get("CASE");
    const odd = rank === Number(Deno.env.get("ODD_RANK"));
    const stage = new parallel.PipelineStage(
      parallel.splitGPT(buildModel(), rank, world),
      rank,
      world,
    );
    const n = kase === "microbatches" && odd ? MICROBATCHES / 2 : MICROBATCHES;
    const schedule = kase === "schedule" && odd
      ? new parallel.Schedule1F1B(stage, n, gptLoss)
      : new parallel.ScheduleGPipe(stage, n, gptLoss);
    let [x, y] = batch(0);
    if (kase === "rows") y = cat([y, y], 0);
    await barrier().wait();
    const started = performance.now();
    try {
      await schedule.step(stage.isFirst ? x : undefined, stage.isLast ? { target: y } : {});
    } catch (err) {
      const e = err as Error & { code?: string };
      return { failed: e.message, code: e.code, ms: performance.now() - started };
    }
    return { failed: null, ms: performance.now() - started };
  } finally {
    await destroyProcessGroup();
  }
});
