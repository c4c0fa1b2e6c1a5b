/**
 * Worker for ddp_plain_backward_test.ts: the PyTorch habit `loss.backward()` on a DDP model.
 * Step 0 and step 3 are first tried with a plain backward, which must throw at once; after
 * `zeroGrad()` each step is redone with `await ddp.backward(loss)`. The final parameters must be
 * those of an uninterrupted run. Then gradient accumulation with a plain backward inside
 * `noSync` (allowed) followed by a synchronised one.
 * @module
 */

import { destroyProcessGroup, getRank, initProcessGroup } from "../../../src/distributed/mod.ts";
import { DistributedDataParallel } from "../../../src/parallel/mod.ts";
import { tidyAsync } from "../../../src/tensor/scope.ts";
import { envInt, runWorker } from "../../_harness/worker.ts";
import {
  batchLoss,
  buildModel,
  buildOptimizer,
  gradValues,
  NO_SYNC_STEPS,
  paramValues,
  ROWS,
  SMALL_BUCKETS,
} from "./problem.ts";

/** Synchronised steps of the first run (set by the test). */
const TRAP_STEPS = envInt("TRAP_STEPS", 6);
/** Steps at which a plain backward is tried first. */
const TRAPPED = [0, 3];

async function plainBackwardThenFix(seed: number) {
  const rank = getRank();
  const model = buildModel(seed);
  const ddp = await DistributedDataParallel.create(model, SMALL_BUCKETS);
  const optimizer = buildOptimizer(model);
  const errors: string[] = [];
  const gradsAfterError: string[][] = [];
  for (let step = 0; step < TRAP_STEPS; step++) {
    const loss = () => batchLoss(ddp, step, rank * ROWS, (rank + 1) * ROWS);
    if (TRAPPED.includes(step)) {
      await tidyAsync(() => {
        try {
          loss().backward();
          errors.push("no error");
        } catch (error) {
          errors.push((error as Error).message);
        }
        return Promise.resolve();
      });
      gradsAfterError.push(Object.keys(gradValues(model)));
      optimizer.zeroGrad();
    }
    await tidyAsync(async () => {
      await ddp.backward(loss());
      optimizer.step();
      optimizer.zeroGrad();
    });
  }
  return { errors, gradsAfterError, final: paramValues(model) };
}

async function plainBackwardInsideNoSync(seed: number) {
  const rank = getRank();
  const model = buildModel(seed);
  const ddp = await DistributedDataParallel.create(model, SMALL_BUCKETS);
  const optimizer = buildOptimizer(model);
  for (let step = 0; step < NO_SYNC_STEPS; step++) {
    const loss = (m: number) => batchLoss(ddp, step * 2 + m, rank * ROWS, (rank + 1) * ROWS, 0.5);
    await ddp.noSync(() => tidyAsync(() => Promise.resolve(loss(0).backward())));
    await tidyAsync(() => ddp.backward(loss(1)));
    optimizer.step();
    optimizer.zeroGrad();
  }
  return { final: paramValues(model) };
}

await runWorker(async () => {
  await initProcessGroup({ timeoutMs: 20_000 });
  try {
    const rank = getRank();
    return {
      trapped: await plainBackwardThenFix(3000 + rank),
      noSync: await plainBackwardInsideNoSync(4000 + rank),
    };
  } finally {
    await destroyProcessGroup();
  }
});
