/**
 * Worker for ddp_grad_sync_test.ts: nanoGPT's gradient accumulation, `ACCUM` micro-steps per
 * optimizer step with `ddp.requireBackwardGradSync = (microStep === ACCUM - 1)`, and the same run
 * with `noSync`, counting the collectives each micro-step issues (from the profiler's comm row).
 * Then the flag's refusals: a change while `ddp.backward` runs, and a value that is not a boolean.
 * @module
 */

import { destroyProcessGroup, getRank, initProcessGroup } from "../../../src/distributed/mod.ts";
import { DistributedDataParallel } from "../../../src/parallel/mod.ts";
import { startProfile, stopProfile } from "../../../src/profile/tracer.ts";
import { tidyAsync } from "../../../src/tensor/scope.ts";
import { envInt, runWorker } from "../../_harness/worker.ts";
import {
  batchLoss,
  buildModel,
  buildOptimizer,
  gradValues,
  paramValues,
  ROWS,
  SMALL_BUCKETS,
} from "./problem.ts";

/** Micro-steps per optimizer step, and optimizer steps (set by the test). */
const ACCUM = envInt("ACCUM", 4), STEPS = envInt("STEPS", 3);

const traces = Deno.makeTempDirSync({ prefix: "dtrain-grad-sync-" });

/** Runs `fn` under the profiler and returns how many collectives it recorded on the comm row. */
async function collectivesIn(fn: () => Promise<void>): Promise<number> {
  startProfile(`${traces}/trace.json`);
  let path: string | null = null;
  try {
    await fn();
  } finally {
    path = stopProfile();
  }
  const { traceEvents } = JSON.parse(Deno.readTextFileSync(path!));
  Deno.removeSync(path!);
  return (traceEvents as { cat: string; ph: string }[])
    .filter((e) => e.ph === "X" && e.cat === "comm").length;
}

/**
 * Trains `STEPS` optimizer steps of `ACCUM` micro-steps, skipping synchronisation on all but the
 * last micro-step either with the flag (nanoGPT's form) or with `noSync`.
 */
async function accumulate(seed: number, form: "flag" | "noSync") {
  const rank = getRank();
  const model = buildModel(seed);
  const ddp = await DistributedDataParallel.create(model, SMALL_BUCKETS);
  const optimizer = buildOptimizer(model);
  const collectives: number[][] = [];
  const flags: boolean[] = [];
  let firstGrads: Record<string, number[]> = {};
  for (let step = 0; step < STEPS; step++) {
    const counts: number[] = [];
    for (let microStep = 0; microStep < ACCUM; microStep++) {
      const last = microStep === ACCUM - 1;
      const loss = () =>
        batchLoss(ddp, step * ACCUM + microStep, rank * ROWS, (rank + 1) * ROWS, 1 / ACCUM);
      const backward = () => tidyAsync(() => ddp.backward(loss()));
      if (form === "flag") ddp.requireBackwardGradSync = last;
      counts.push(
        await collectivesIn(form === "flag" || last ? backward : () => ddp.noSync(backward)),
      );
      flags.push(ddp.requireBackwardGradSync);
    }
    collectives.push(counts);
    if (step === 0) firstGrads = gradValues(model);
    optimizer.step();
    optimizer.zeroGrad();
  }
  return { collectives, flags, firstGrads, final: paramValues(model) };
}

/** The flag's refusals; the backward in flight still completes. */
async function refusals(seed: number) {
  const rank = getRank();
  const model = buildModel(seed);
  const ddp = await DistributedDataParallel.create(model, SMALL_BUCKETS);
  const messages: string[] = [];
  await tidyAsync(async () => {
    // backward runs loss.backward() before its first await, so it is in progress here.
    const running = ddp.backward(batchLoss(ddp, 0, rank * ROWS, (rank + 1) * ROWS));
    try {
      ddp.requireBackwardGradSync = false;
    } catch (error) {
      messages.push((error as Error).message);
    }
    await running;
  });
  try {
    (ddp as unknown as { requireBackwardGradSync: unknown }).requireBackwardGradSync = 1;
  } catch (error) {
    messages.push(`${(error as Error).name}: ${(error as Error).message}`);
  }
  return { messages, flag: ddp.requireBackwardGradSync, grads: gradValues(model) };
}

await runWorker(async () => {
  await initProcessGroup({ timeoutMs: 20_000 });
  try {
    const rank = getRank();
    return {
      flag: await accumulate(5000 + rank, "flag"),
      noSync: await accumulate(5000 + rank, "noSync"),
      refusals: await refusals(6000 + rank),
    };
  } finally {
    await destroyProcessGroup();
    Deno.removeSync(traces, { recursive: true });
  }
});
