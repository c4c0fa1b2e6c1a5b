/**
 * Worker for diloco_link_test.ts: one DiLoCo replica per host of a throttled link. Joins the
 * group at env MASTER (rank 0's address; rank 0 hosts the store on port 29500), builds the MLP of
 * problem.ts from a seed of its own (DiLoCo.create must make every replica rank 0's), and trains
 * ROUNDS outer steps of H inner steps on this rank's rows. Prints `{ ok, final, lossBefore,
 * lossAfter, syncs: [{ bytes, ms }] }`: the weights, the mean loss over both replicas' rows
 * before and after, and what each outer step cost.
 * @module
 */

import { destroyProcessGroup, initProcessGroup } from "../../../src/distributed/mod.ts";
import { DiLoCo } from "../../../src/parallel/mod.ts";
import { noGrad } from "../../../src/tensor/grad_mode.ts";
import { tidy } from "../../../src/tensor/scope.ts";
import { envInt, runWorker } from "../../_harness/worker.ts";
import { batchLoss, buildModel, buildOptimizer, paramValues, ROWS } from "./problem.ts";

const H = envInt("H", 5), ROUNDS = envInt("ROUNDS", 3);

await runWorker(async () => {
  const rank = envInt("RANK", -1);
  await initProcessGroup({
    backend: "gloo",
    initMethod: `tcp://${Deno.env.get("MASTER")}:29500`,
    rank,
    worldSize: 2,
    timeoutMs: 30_000,
  });
  try {
    const model = buildModel(7000 + rank);
    const inner = buildOptimizer(model);
    const diloco = await DiLoCo.create(model, inner, { syncEvery: H });
    // The mean loss over every row either replica trains on (the rows are a fixed set).
    const trainingLoss = () =>
      tidy(() =>
        noGrad(() => {
          let sum = 0;
          for (let index = 0; index < ROUNDS * H; index++) {
            sum += batchLoss(model, index, 0, 2 * ROWS).item();
          }
          return sum / (ROUNDS * H);
        })
      );
    const lossBefore = trainingLoss();
    const syncs = [];
    for (let index = 0; index < ROUNDS * H; index++) {
      inner.zeroGrad();
      tidy(() => batchLoss(model, index, rank * ROWS, (rank + 1) * ROWS).backward());
      if (await diloco.step()) syncs.push(diloco.lastSync!);
    }
    const lossAfter = trainingLoss();
    diloco.dispose();
    return { final: paramValues(model), lossBefore, lossAfter, syncs };
  } finally {
    await destroyProcessGroup();
  }
});
