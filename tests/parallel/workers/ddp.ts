/**
 * Worker for ddp_test.ts: trains the shared problem with DistributedDataParallel on this rank's
 * rows and reports parameters, gradients and errors. CASE picks the scenario:
 * - "train": the rank-0 broadcast, 20 steps with many small buckets and with one bucket, and
 *   `noSync` gradient accumulation;
 * - "unused": a parameter unused in some steps, with and without `findUnusedParameters`, and an
 *   AdamW step (weight decay) after a backward that no rank used it in;
 * - "mismatch": rank 1 wraps a model of another shape, then of another depth.
 * @module
 */

import {
  destroyProcessGroup,
  getRank,
  getWorldSize,
  initProcessGroup,
} from "../../../src/distributed/mod.ts";
import { Linear } from "../../../src/nn/layers.ts";
import { Module } from "../../../src/nn/module.ts";
import { MLP } from "../../../src/nn/container.ts";
import { AdamW } from "../../../src/optim/adamw.ts";
import { type DDPOptions, DistributedDataParallel } from "../../../src/parallel/mod.ts";
import { noGrad } from "../../../src/tensor/autograd.ts";
import { tensor } from "../../../src/tensor/creation.ts";
import { crossEntropy } from "../../../src/tensor/ops/cross_entropy.ts";
import { manualSeed } from "../../../src/tensor/random.ts";
import { tidyAsync } from "../../../src/tensor/scope.ts";
import type { Tensor } from "../../../src/tensor/tensor.ts";
import { runWorker } from "../../_harness/worker.ts";
import {
  batchLoss,
  batchRows,
  buildModel,
  buildOptimizer,
  CLASSES,
  gradValues,
  INPUTS,
  MICRO_BATCHES,
  NO_SYNC_STEPS,
  paramValues,
  ROWS,
  SMALL_BUCKETS,
  STEPS,
} from "./problem.ts";

async function errorOf(fn: () => Promise<unknown>): Promise<string> {
  try {
    await fn();
  } catch (error) {
    return (error as Error).message;
  }
  return "no error";
}

/** Trains `STEPS` synchronised steps on this rank's rows of each global batch. */
async function train(seed: number, options: DDPOptions) {
  const rank = getRank();
  const model = buildModel(seed);
  const before = paramValues(model);
  const ddp = await DistributedDataParallel.create(model, options);
  const after = paramValues(model);
  const hookCalls: Record<string, number> = {};
  for (const [name, p] of model.namedParameters()) {
    p.registerPostAccumulateGradHook(() => hookCalls[name] = (hookCalls[name] ?? 0) + 1);
  }
  const optimizer = buildOptimizer(model);
  for (let step = 0; step < STEPS; step++) {
    await tidyAsync(async () => {
      await ddp.backward(batchLoss(model, step, rank * ROWS, (rank + 1) * ROWS));
      optimizer.step();
      optimizer.zeroGrad();
    });
  }
  return { before, after, final: paramValues(model), hookCalls, stats: ddp.lastStats };
}

/**
 * `MICRO_BATCHES` backward passes per step, all but the last inside `noSync`. Reports the
 * gradients after the very first one, which must be this rank's own, and the final parameters.
 */
async function trainNoSync(seed: number) {
  const rank = getRank();
  const model = buildModel(seed);
  const ddp = await DistributedDataParallel.create(model, SMALL_BUCKETS);
  const optimizer = buildOptimizer(model);
  let firstGrads: Record<string, number[]> = {};
  for (let step = 0; step < NO_SYNC_STEPS; step++) {
    for (let m = 0; m < MICRO_BATCHES; m++) {
      const index = step * MICRO_BATCHES + m;
      await tidyAsync(async () => {
        const loss = batchLoss(model, index, rank * ROWS, (rank + 1) * ROWS, 1 / MICRO_BATCHES);
        if (m < MICRO_BATCHES - 1) await ddp.noSync(() => ddp.backward(loss));
        else await ddp.backward(loss);
      });
      if (index === 0) firstGrads = gradValues(model);
    }
    optimizer.step();
    optimizer.zeroGrad();
  }
  return { firstGrads, final: paramValues(model) };
}

/**
 * Two heads over the same input; `gated` takes part only while `useGated` is set. The buffer
 * `seen` starts at 100 + rank and grows by `bump` in every forward, so that only DDP's buffer
 * broadcasts keep it equal across ranks.
 */
class Gated extends Module {
  used = new Linear(INPUTS, CLASSES);
  gated = new Linear(INPUTS, CLASSES);
  useGated = true;
  bump = 1;
  readonly seen = tensor([100 + getRank()]);

  constructor() {
    super();
    this.registerBuffer("seen", this.seen);
  }

  forward(x: Tensor): Tensor {
    noGrad(() => this.seen.fill_(this.seen.item() + this.bump));
    const out = this.used.forward(x);
    return this.useGated ? out.add(this.gated.forward(x)) : out;
  }
}

/** The loss of `model` on this rank's rows of batch 0. */
function gatedLoss(model: Module, rank: number): Tensor {
  const [xs, ys] = batchRows(0, rank * ROWS, (rank + 1) * ROWS);
  return crossEntropy(model.forward(tensor(xs, [ROWS, INPUTS])), tensor(ys, [ROWS]));
}

async function unused() {
  const rank = getRank();
  manualSeed(7);
  const model = new Gated();
  model.bump = rank === 0 ? 1 : 5;
  const ddp = await DistributedDataParallel.create(model, { findUnusedParameters: true });
  const seen = [model.seen.item()];
  // A copy without DDP gives this rank's own gradient, to check what the all-reduce made of it.
  const local = new Gated();
  local.loadStateDict(model.stateDict());
  const steps: { grads: Record<string, number[]>; localGrads: Record<string, number[]> }[] = [];
  // Step 0: gated used everywhere; 1: nowhere; 2: on rank 0 only.
  for (const useGated of [() => true, () => false, (r: number) => r === 0]) {
    model.useGated = local.useGated = useGated(rank);
    await tidyAsync(async () => {
      await ddp.backward(gatedLoss(model, rank));
      gatedLoss(local, rank).backward();
    });
    steps.push({ grads: gradValues(model), localGrads: gradValues(local) });
    seen.push(model.seen.item());
    model.zeroGrad();
    local.zeroGrad();
  }
  // Gradient accumulation: gated takes part only in the noSync pass, so the synced pass leaves
  // what each rank accumulated for it as it stands, and the reduce averages that (PyTorch too).
  const bothPasses = async () => {
    await ddp.backward(gatedLoss(model, rank));
    gatedLoss(local, rank).backward();
  };
  model.useGated = local.useGated = true;
  await ddp.noSync(() => tidyAsync(bothPasses));
  model.useGated = local.useGated = false;
  await tidyAsync(bothPasses);
  const accumulated = { grads: gradValues(model), localGrads: gradValues(local) };
  model.zeroGrad();
  local.zeroGrad();
  // Weight decay must not touch a parameter no rank used: it has no gradient, as in one process.
  model.useGated = false;
  const optimizer = new AdamW(model.parameters(), { lr: 0.01, weightDecay: 0.5 });
  const beforeStep = paramValues(model);
  await tidyAsync(() => ddp.backward(gatedLoss(model, rank)));
  optimizer.step();
  const decay = { before: beforeStep, after: paramValues(model) };
  optimizer.zeroGrad();
  manualSeed(8);
  const strict = new Gated();
  strict.useGated = false;
  const strictDdp = await DistributedDataParallel.create(strict);
  const error = await errorOf(() => tidyAsync(() => strictDdp.backward(gatedLoss(strict, rank))));
  return { steps, seen, error, decay, accumulated };
}

async function mismatch() {
  const rank = getRank();
  const shapeError = await errorOf(() =>
    DistributedDataParallel.create(buildModel(3, rank === 1 ? 12 : 16))
  );
  const countError = await errorOf(() =>
    DistributedDataParallel.create(
      new MLP(rank === 1 ? [INPUTS, 5, 5, CLASSES] : [INPUTS, 5, CLASSES]),
    )
  );
  return { shapeError, countError };
}

await runWorker(async () => {
  await initProcessGroup({ timeoutMs: 20_000 });
  try {
    switch (Deno.env.get("CASE")) {
      case "train": {
        const rank = getRank();
        const multi = await train(1000 + rank, SMALL_BUCKETS);
        const single = await train(1000 + rank, {});
        const noSync = await trainNoSync(2000 + rank);
        return { worldSize: getWorldSize(), multi, single, noSync };
      }
      case "unused":
        return await unused();
      case "mismatch":
        return await mismatch();
      default:
        throw new Error(`ddp.ts: unknown CASE "${Deno.env.get("CASE")}"`);
    }
  } finally {
    await destroyProcessGroup();
  }
});
