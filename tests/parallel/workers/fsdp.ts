/**
 * Worker for fsdp_test.ts: trains the shared problems with fullyShard on this rank's rows and
 * reports the gathered state dicts. CASE picks the scenario:
 * - "train": every wrapping and option (MODELS lists the configurations to run);
 * - "mismatch": rank 1 shards a model of other shapes than rank 0's;
 * - "kill": rank KILL_RANK SIGKILLs itself where the others are in an all-gather (WHERE:
 *   "backward", "forward" (before the forward), or "prefetch" (inside the first block's forward,
 *   while the next block's prefetched all-gather is in flight)), and the survivors report their
 *   errors, after printing in which pass they failed.
 * @module
 */

import {
  destroyProcessGroup,
  getRank,
  getWorldSize,
  initProcessGroup,
} from "../../../src/distributed/mod.ts";
import { clipGradNorm } from "../../../src/nn/utils/clip_grad.ts";
import { MLP } from "../../../src/nn/container.ts";
import { randn } from "../../../src/tensor/creation.ts";
import type { Module } from "../../../src/nn/module.ts";
import { fsdpStateOf, fullStateDict, fullyShard } from "../../../src/parallel/mod.ts";
import { noGrad } from "../../../src/tensor/autograd.ts";
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
  let evalLosses: number[] = [];
  for (let step = 0; step < STEPS; step++) {
    // After a step, the forward order is known: this evaluation forward prefetches.
    if (step === 2) evalLosses = await evalBeside(kind, model, rank);
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
  const groups = nested ? innerModules(built).length : 0;
  return { final, norms, fullCount, localCount, stats: model.lastStats, groups, evalLosses };
}

/** An evaluation loss of `model` (no graph) and of a plain model with its full state dict. */
async function evalBeside(kind: Kind, model: Module, rank: number): Promise<number[]> {
  const plain = buildModel(kind);
  plain.loadStateDict(await fullStateDict(model));
  const loss = (m: Module) =>
    noGrad(() => batchLoss(kind, m, 99, rank * ROWS, (rank + 1) * ROWS).item());
  return [loss(model), loss(plain)];
}

async function kill() {
  const rank = getRank();
  const victim = Number(Deno.env.get("KILL_RANK"));
  const where = Deno.env.get("WHERE");
  const built = buildModel("mlp");
  const [first, second] = innerModules(built);
  let step = 0;
  if (where === "prefetch" && rank === victim) {
    // Dies inside the first block's forward, once the second block's all-gather is started.
    const forward = first.forward.bind(first);
    Object.assign(first, {
      forward: (x: unknown) => {
        if (step === 2) {
          console.log(`next block ${fsdpStateOf(second)!.group!.state}`);
          Deno.kill(Deno.pid, "SIGKILL");
        }
        return forward(x);
      },
    });
  }
  for (const m of innerModules(built)) fullyShard(m);
  const model = fullyShard(built);
  const pass = async <T>(name: string, fn: () => T | Promise<T>): Promise<T> => {
    try {
      return await fn();
    } catch (err) {
      console.log(`failed in ${name}`);
      throw err;
    }
  };
  for (; step < 3; step++) {
    if (step === 2 && rank === victim && where === "forward") Deno.kill(Deno.pid, "SIGKILL");
    const loss = await pass(
      "forward",
      () => batchLoss("mlp", model, step, rank * ROWS, (rank + 1) * ROWS),
    );
    if (step === 2 && rank === victim) Deno.kill(Deno.pid, "SIGKILL");
    await pass("backward", () => model.backward(loss));
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
  const world = await initProcessGroup({
    backend: "gloo",
    timeoutMs: Number(Deno.env.get("TEST_TIMEOUT_MS") ?? 20_000),
  });
  try {
    if (Deno.env.get("CASE") === "kill") return await kill();
    if (Deno.env.get("CASE") === "mismatch") return mismatch();
    const configs = JSON.parse(Deno.env.get("CONFIGS")!) as Config[];
    const results = [];
    for (const config of configs) results.push(await train(config));
    return { results, worldSize: getWorldSize(), backend: world.backendName };
  } finally {
    await destroyProcessGroup();
  }
});
