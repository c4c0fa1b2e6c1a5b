/**
 * Worker for sharded_test.ts: CASE "save" trains the first SAVE_STEPS steps of the FSDP problem
 * on this many ranks and saves a sharded checkpoint to DIR; CASE "resume" loads it (on any number
 * of ranks), trains up to STEPS and reports the gathered state dict; CASE "disagree" saves after
 * STEPS, then saves again with rank 1's AdamW step count of one parameter off by one and
 * reports that save's error and the generation left in DIR.
 * @module
 */

import {
  consolidate,
  loadSharded,
  readShardedMetadata,
  saveSharded,
} from "../../src/checkpoint/mod.ts";
import {
  barrier,
  destroyProcessGroup,
  getRank,
  initProcessGroup,
} from "../../src/distributed/mod.ts";
import { fullStateDict, fullyShard } from "../../src/parallel/mod.ts";
import { tidyAsync } from "../../src/tensor/scope.ts";
import { runWorker } from "../_harness/worker.ts";
import { listing } from "./_listing.ts";
import {
  batchLoss,
  buildModel,
  buildOptimizer,
  innerModules,
  type Kind,
  ROWS,
  stateValues,
  STEPS,
} from "../parallel/workers/fsdp_problem.ts";

await runWorker(async () => {
  await initProcessGroup({ backend: "gloo", timeoutMs: 20_000 });
  try {
    const kind = Deno.env.get("KIND") as Kind, dir = Deno.env.get("DIR")!;
    const rank = getRank();
    const built = buildModel(kind);
    for (const m of innerModules(built)) fullyShard(m);
    const model = fullyShard(built);
    const optimizer = buildOptimizer(model.parameters());
    let first = 0;
    if (Deno.env.get("CASE") === "resume") {
      first = loadSharded(dir, { model, optimizer }).step as number;
    }
    const last = Deno.env.get("CASE") === "save" ? Number(Deno.env.get("SAVE_STEPS")) : STEPS;
    for (let step = first; step < last; step++) {
      await tidyAsync(async () => {
        await model.backward(batchLoss(kind, model, step, rank * ROWS, (rank + 1) * ROWS));
        optimizer.step();
        optimizer.zeroGrad();
      });
    }
    if (Deno.env.get("CASE") === "disagree") {
      await saveSharded(dir, { model, optimizer, extra: { step: last } });
      const state = optimizer.state.get(model.parameters()[0])!;
      if (rank === 1) state.step = (state.step as number) + 1;
      const error = await saveSharded(dir, { model, optimizer }).then(() => null, (e) => e.message);
      await barrier(); // each rank takes its own piece list back: list once both have
      return { error, generation: readShardedMetadata(dir)?.generation, files: listing(dir) };
    }
    if (Deno.env.get("CASE") === "save") {
      await saveSharded(dir, { model, optimizer, extra: { step: last } });
      if (rank === 0) consolidate(dir, `${dir}/consolidated.safetensors`);
    }
    return { final: stateValues(await fullStateDict(model)) };
  } finally {
    await destroyProcessGroup();
  }
});
