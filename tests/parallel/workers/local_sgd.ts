/**
 * Worker for local_sgd_test.ts: LocalSGD over the ranks, `STEPS` optimizer steps on this rank's
 * rows with an average every `SYNC_EVERY`; per step, the weights after `optimizer.step()` and
 * after `localSgd.step()`, and whether it averaged. Last, the refusal of a bad period.
 * @module
 */

import { destroyProcessGroup, getRank, initProcessGroup } from "../../../src/distributed/mod.ts";
import { LocalSGD } from "../../../src/parallel/mod.ts";
import { tidy } from "../../../src/tensor/scope.ts";
import { envInt, runWorker } from "../../_harness/worker.ts";
import { batchLoss, buildModel, buildOptimizer, paramValues, ROWS } from "./problem.ts";

/** Steps between averages, and steps (set by the test). */
const SYNC_EVERY = envInt("SYNC_EVERY", 3), STEPS = envInt("STEPS", 7);

await runWorker(async () => {
  await initProcessGroup({ timeoutMs: 20_000 });
  try {
    const rank = getRank();
    // Each rank builds other weights: `create` must make them rank 0's.
    const model = buildModel(9000 + rank);
    const optimizer = buildOptimizer(model);
    const localSgd = await LocalSGD.create(model, { syncEvery: SYNC_EVERY });
    const initial = paramValues(model);
    const steps = [];
    for (let step = 0; step < STEPS; step++) {
      optimizer.zeroGrad();
      tidy(() => batchLoss(model, step, rank * ROWS, (rank + 1) * ROWS).backward());
      optimizer.step();
      const stepped = paramValues(model);
      const synced = await localSgd.step();
      steps.push({ stepped, after: paramValues(model), synced, localStep: localSgd.localStep });
    }
    const refusal = await LocalSGD.create(model, { syncEvery: 1.5 }).then(
      () => "accepted",
      (e: Error) => `${e.name}: ${e.message}`,
    );
    return { initial, steps, refusal };
  } finally {
    await destroyProcessGroup();
  }
});
