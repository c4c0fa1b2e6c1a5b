/**
 * The fully sharded MLP the checkpoint crash and async-save workers train between saves: each
 * inner layer and the root wrapped by `fullyShard`, an optimizer, and a step on this rank's rows of
 * batch `index`.
 * @module
 */

import { fullyShard } from "../../src/parallel/mod.ts";
import { tidyAsync } from "../../src/tensor/scope.ts";
import {
  batchLoss,
  buildModel,
  buildOptimizer,
  innerModules,
  ROWS,
} from "../parallel/workers/fsdp_problem.ts";

/** The sharded model, its optimizer, and one training step on rank `rank`'s rows. */
export function shardedMlp(rank: number) {
  const built = buildModel("mlp");
  for (const m of innerModules(built)) fullyShard(m);
  const model = fullyShard(built);
  const optimizer = buildOptimizer(model.parameters());
  const step = (index: number) =>
    tidyAsync(async () => {
      await model.backward(batchLoss("mlp", model, index, rank * ROWS, (rank + 1) * ROWS));
      optimizer.step();
      optimizer.zeroGrad();
    });
  return { model, optimizer, step };
}
