// LocalSGD on 2 real rank processes: the replicas step alone and average their parameters exactly
// every `syncEvery` optimizer steps, to the mean of what each held.
import assert from "node:assert/strict";
import { assertAllOk, runRanks } from "../_harness/ranks.ts";
import { describe, markedProcesses, markerEnv } from "../_harness/processes.ts";

const worker = new URL("./workers/local_sgd.ts", import.meta.url);
const WORLD = 2, SYNC_EVERY = 3, STEPS = 7;

type Values = Record<string, number[]>;
interface Step {
  stepped: Values;
  after: Values;
  synced: boolean;
  localStep: number;
}

Deno.test(`LocalSGD on ${WORLD} ranks averages the parameters exactly every ${SYNC_EVERY} steps`, async (t) => {
  const marker = crypto.randomUUID();
  const runs = await runRanks({
    worker,
    worldSize: WORLD,
    timeoutMs: 60_000,
    env: { SYNC_EVERY: String(SYNC_EVERY), STEPS: String(STEPS), ...markerEnv(marker) },
  });
  const left = markedProcesses(marker);
  assert.deepEqual(left, [], `left behind: ${describe(left)}`);
  assertAllOk(runs);
  const results = runs.map((r) => r.result as { initial: Values; steps: Step[]; refusal: string });

  await t.step("create gives every rank rank 0's weights", () => {
    assert.deepEqual(results[1].initial, results[0].initial);
  });

  await t.step(`step() averages on steps ${SYNC_EVERY} and ${2 * SYNC_EVERY} only`, () => {
    const expected = Array.from({ length: STEPS }, (_, i) => (i + 1) % SYNC_EVERY === 0);
    for (const r of results) {
      assert.deepEqual(r.steps.map((s) => s.synced), expected);
      assert.deepEqual(r.steps.map((s) => s.localStep), [1, 2, 0, 1, 2, 0, 1]);
    }
  });

  await t.step("an average is the mean of the ranks' weights; between, each keeps its own", () => {
    for (let step = 0; step < STEPS; step++) {
      const [a, b] = results.map((r) => r.steps[step]);
      assert.notDeepEqual(a.stepped, b.stepped, `step ${step + 1}: the replicas trained alone`);
      if (!a.synced) {
        results.forEach((r, rank) => {
          const s = r.steps[step];
          assert.deepEqual(s.after, s.stepped, `step ${step + 1}, rank ${rank}: untouched`);
        });
        continue;
      }
      for (const [name, xs] of Object.entries(a.stepped)) {
        xs.forEach((x, i) => {
          const mean = Math.fround(Math.fround(x + b.stepped[name][i]) / 2);
          assert.equal(a.after[name][i], mean, `step ${step + 1}: ${name}[${i}]`);
        });
      }
      assert.deepEqual(b.after, a.after, `step ${step + 1}: rank 1 equals rank 0`);
    }
  });

  await t.step("create refuses a period that is not a whole number of steps", () => {
    for (const r of results) {
      assert.equal(
        r.refusal,
        "RangeError: LocalSGD: syncEvery must be an integer of at least 1, got 1.5",
      );
    }
  });
});
