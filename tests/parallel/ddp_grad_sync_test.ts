// `ddp.requireBackwardGradSync` (PyTorch's require_backward_grad_sync, issue 23) on 2 real rank
// processes: nanoGPT's gradient accumulation over 4 micro-steps gives the averaged gradient of one
// big batch, equals the `noSync` form bit for bit, and issues no collective on the micro-steps
// that skip synchronisation.
import assert from "node:assert/strict";
import { tidy } from "../../src/tensor/scope.ts";
import type { Tensor } from "../../src/tensor/tensor.ts";
import { assertAllOk, runRanks } from "../_harness/ranks.ts";
import { describe, markedProcesses, markerEnv } from "../_harness/processes.ts";
import {
  batchLoss,
  buildModel,
  gradValues,
  localGradients,
  ROWS,
  SMALL_BUCKET_COUNT,
  trainReference,
} from "./workers/problem.ts";

const worker = new URL("./workers/ddp_grad_sync.ts", import.meta.url);
const WORLD = 2, ACCUM = 4, STEPS = 3;

type Params = Record<string, number[]>;
interface Accumulated {
  collectives: number[][];
  flags: boolean[];
  firstGrads: Params;
  final: Params;
}

function maxDiff(actual: Params, expected: Params): number {
  assert.deepEqual(Object.keys(actual), Object.keys(expected), "parameter names");
  let worst = 0;
  for (const [name, want] of Object.entries(expected)) {
    assert.equal(actual[name].length, want.length, `${name}: length`);
    want.forEach((v, i) => worst = Math.max(worst, Math.abs(actual[name][i] - v)));
  }
  return worst;
}

/** One process's gradient of the mean loss over all ranks' rows of the first step's micro-steps. */
function bigBatchGradient(seed: number): Params {
  const model = buildModel(seed);
  tidy(() => {
    let loss: Tensor | null = null;
    for (let m = 0; m < ACCUM; m++) {
      const part = batchLoss(model, m, 0, WORLD * ROWS, 1 / ACCUM);
      loss = loss === null ? part : loss.add(part);
    }
    loss!.backward();
  });
  return gradValues(model);
}

Deno.test(`DDP requireBackwardGradSync on ${WORLD} ranks: ${ACCUM} accumulated micro-steps equal one big batch, like noSync, with no collective while off`, async (t) => {
  const marker = crypto.randomUUID();
  const runs = await runRanks({
    worker,
    worldSize: WORLD,
    timeoutMs: 60_000,
    env: { ACCUM: String(ACCUM), STEPS: String(STEPS), ...markerEnv(marker) },
  });
  const left = markedProcesses(marker);
  assert.deepEqual(left, [], `left behind: ${describe(left)}`);
  assertAllOk(runs);
  const results = runs.map((r) =>
    r.result as {
      flag: Accumulated;
      noSync: Accumulated;
      refusals: { messages: string[]; flag: boolean; grads: Params };
    }
  );

  await t.step("skipped micro-steps issue no collective, the synced one every bucket", () => {
    const perStep = [...Array(ACCUM - 1).fill(0), SMALL_BUCKET_COUNT];
    results.forEach(({ flag, noSync }, rank) => {
      assert.deepEqual(flag.collectives, Array(STEPS).fill(perStep), `rank ${rank}, flag`);
      assert.deepEqual(noSync.collectives, Array(STEPS).fill(perStep), `rank ${rank}, noSync`);
    });
  });

  await t.step("the flag stays as set (true only on each step's last micro-step)", () => {
    const perStep = [...Array(ACCUM - 1).fill(false), true];
    results.forEach(({ flag, noSync }, rank) => {
      assert.deepEqual(flag.flags, Array(STEPS).fill(perStep).flat(), `rank ${rank}, flag`);
      assert.deepEqual(noSync.flags, Array(STEPS * ACCUM).fill(true), `rank ${rank}, noSync`);
    });
  });

  await t.step("the accumulated gradient is the big batch's, on every rank", () => {
    const reference = bigBatchGradient(5000);
    results.forEach(({ flag }, rank) => {
      const diff = maxDiff(flag.firstGrads, reference);
      assert.ok(diff <= 1e-6, `rank ${rank} differs from the big-batch gradient by ${diff}`);
      assert.deepEqual(flag.firstGrads, results[0].flag.firstGrads, `rank ${rank} equals rank 0`);
    });
  });

  await t.step("the flag form equals the noSync form bit for bit", () => {
    results.forEach(({ flag, noSync }, rank) => {
      assert.deepEqual(flag.firstGrads, noSync.firstGrads, `rank ${rank}: gradients`);
      assert.deepEqual(flag.final, noSync.final, `rank ${rank}: parameters after ${STEPS} steps`);
    });
  });

  await t.step(`${STEPS} optimizer steps match one process on the big batches`, () => {
    const reference = trainReference(5000, WORLD, STEPS, ACCUM);
    results.forEach(({ flag }, rank) => {
      const diff = maxDiff(flag.final, reference);
      assert.ok(diff <= 1e-5, `rank ${rank} differs from the reference by ${diff}`);
    });
  });

  await t.step("the flag refuses a change during ddp.backward and a non-boolean", () => {
    const reference = localGradients(6000, 0, 0, WORLD * ROWS, 1);
    results.forEach(({ refusals }, rank) => {
      assert.deepEqual(refusals.messages, [
        "DistributedDataParallel.requireBackwardGradSync cannot change while ddp.backward is " +
        "running (await it first)",
        "TypeError: DistributedDataParallel.requireBackwardGradSync must be a boolean, got number",
      ], `rank ${rank}`);
      assert.equal(refusals.flag, true, `rank ${rank}: the flag is unchanged`);
      const diff = maxDiff(refusals.grads, reference);
      assert.ok(diff <= 1e-6, `rank ${rank}: the backward in flight averaged, off by ${diff}`);
    });
  });
});
