/**
 * Worker for fsdp_test.ts: trains the shared problems with fullyShard on this rank's rows and
 * reports the gathered state dicts. CASE picks the scenario:
 * - "train": every wrapping and option (MODELS lists the configurations to run);
 * - "mismatch": rank 1 shards a model of other shapes than rank 0's;
 * - "kill": rank KILL_RANK SIGKILLs itself where the others are in an all-gather (WHERE:
 *   "backward" or "forward"), and the survivors report their errors.
 * @module
 */

import {
  destroyProcessGroup,
  getRank,
  getWorldSize,
  initProcessGroup,
} from "../../../src/dist/mod.ts";
import { clipGradNorm } from "../../../src/nn/utils/clip_grad.ts";
import { MLP } from "../../../src/nn/container.ts";
import { randn } from "../../../src/tensor/creation.ts";
import { fullStateDict, fullyShard } from "../../../src/parallel/mod.ts";
import { tidyAsync } from "../../../src/tensor/scope.ts";
import { runWorker } from "../../_harness/worker.ts";
import {
  batchLoss,
  buildModel,
  buildOptimizer,
  innerModules,
  type Kind,
  ROWS,
  stateValues,
  STEPS,
} from "./fsdp_problem.ts";

/**
 * A configuration: model, wrapping, reshardAfterForward, micro-batches per step, and the total
 * norm to clip the gradients to (0: none).
 */
export interface Config {
  kind: Kind;
  nested: boolean;
  reshard: boolean;
  micro: number;
  clip: number;
}

async function train({ kind, nested, reshard, micro, clip }: Config) {
  const rank = getRank();
  const built = buildModel(kind);
  const fullCount = built.numParameters();
  if (nested) {
    for (const m of innerModules(built)) {
      fullyShard(m, { reshardAfterForward: reshard });
    }
  }
  const model = fullyShard(built, { reshardAfterForward: reshard });
  const localCount = model.numParameters();
  const optimizer = buildOptimizer(model.parameters());
  const rows = (m: number, scale: number, step: number) =>
    batchLoss(kind, model, step * micro + m, rank * ROWS, (rank + 1) * ROWS, scale);
  const norms: number[] = [];
  for (let step = 0; step < STEPS; step++) {
    await tidyAsync(async () => {
      await model.noSync(async () => {
        for (let m = 0; m < micro - 1; m++) await model.backward(rows(m, 1 / micro, step));
      });
      await model.backward(rows(micro - 1, 1 / micro, step));
      if (clip > 0) norms.push(clipGradNorm(model.parameters(), clip));
      optimizer.step();
      optimizer.zeroGrad();
    });
  }
  const final = stateValues(await fullStateDict(model));
  return { final, norms, fullCount, localCount, stats: model.lastStats };
}

async function kill() {
  const rank = getRank();
  const victim = Number(Deno.env.get("KILL_RANK"));
  const where = Deno.env.get("WHERE");
  const built = buildModel("mlp");
  for (const m of innerModules(built)) fullyShard(m);
  const model = fullyShard(built);
  for (let step = 0; step < 3; step++) {
    if (step === 2 && rank === victim && where === "forward") Deno.kill(Deno.pid, "SIGKILL");
    const loss = batchLoss("mlp", model, step, rank * ROWS, (rank + 1) * ROWS);
    if (step === 2 && rank === victim) Deno.kill(Deno.pid, "SIGKILL");
    await model.backward(loss);
  }
  return {};
}

/** Rank 1 shards a wider model: the first forward's all-gather must refuse it on every rank. */
function mismatch() {
  const model = fullyShard(new MLP(getRank() === 1 ? [8, 12, 4] : [8, 10, 4]));
  try {
    model.forward(randn([2, 8]));
  } catch (err) {
    return { error: (err as Error).message };
  }
  return { error: "no error" };
}

await runWorker(async () => {
  await initProcessGroup({
    backend: "gloo",
    timeoutMs: Number(Deno.env.get("TEST_TIMEOUT_MS") ?? 20_000),
  });
  try {
    if (Deno.env.get("CASE") === "kill") return await kill();
    if (Deno.env.get("CASE") === "mismatch") return mismatch();
    const configs = JSON.parse(Deno.env.get("CONFIGS")!) as Config[];
    const results = [];
    for (const config of configs) results.push(await train(config));
    return { results, worldSize: getWorldSize() };
  } finally {
    await destroyProcessGroup();
  }
});
