// DDP and the PyTorch habit `loss.backward()` (issue 8): on 2 real rank processes a plain
// backward outside `ddp.backward` throws at once with an error that says what to call, and the
// steps after it (redone with `await ddp.backward(loss)`) end exactly where an uninterrupted run
// does; inside `noSync` a plain backward accumulates as it should.
import assert from "node:assert/strict";
import { assertAllOk, runRanks } from "../_harness/ranks.ts";
import { describe, markedProcesses, markerEnv } from "../_harness/processes.ts";
import { NO_SYNC_STEPS, trainReference } from "./workers/problem.ts";

const worker = new URL("./workers/ddp_plain_backward.ts", import.meta.url);
const TRAP_STEPS = 6;

type Params = Record<string, number[]>;

function maxDiff(actual: Params, expected: Params): number {
  assert.deepEqual(Object.keys(actual), Object.keys(expected), "parameter names");
  let worst = 0;
  for (const [name, want] of Object.entries(expected)) {
    want.forEach((v, i) => worst = Math.max(worst, Math.abs(actual[name][i] - v)));
  }
  return worst;
}

Deno.test("DDP on 2 ranks: a plain loss.backward() throws at once and later steps stay exact", async (t) => {
  const marker = crypto.randomUUID();
  const runs = await runRanks({
    worker,
    worldSize: 2,
    timeoutMs: 60_000,
    env: { TRAP_STEPS: String(TRAP_STEPS), ...markerEnv(marker) },
  });
  const left = markedProcesses(marker);
  assert.deepEqual(left, [], `left behind: ${describe(left)}`);
  assertAllOk(runs);
  const results = runs.map((r) =>
    r.result as {
      trapped: { errors: string[]; gradsAfterError: string[][]; final: Params };
      noSync: { final: Params };
    }
  );

  await t.step("each plain backward throws, naming `await ddp.backward(loss)`", () => {
    results.forEach(({ trapped }, rank) => {
      assert.equal(trapped.errors.length, 2, `rank ${rank}`);
      for (const error of trapped.errors) {
        assert.match(error, /loss\.backward\(\) ran on a loss computed through the wrapped model/);
        assert.match(error, /Use `await ddp\.backward\(loss\)` instead/);
      }
    });
  });

  await t.step(
    `${TRAP_STEPS} steps redone with ddp.backward match the large-batch reference`,
    () => {
      const reference = trainReference(3000, 2, TRAP_STEPS);
      results.forEach(({ trapped }, rank) => {
        const diff = maxDiff(trapped.final, reference);
        assert.ok(diff <= 1e-5, `rank ${rank} differs from the reference by ${diff}`);
        assert.deepEqual(trapped.final, results[0].trapped.final, `rank ${rank} equals rank 0`);
      });
    },
  );

  await t.step(
    "a plain backward inside noSync accumulates, and the synced step averages it",
    () => {
      const reference = trainReference(4000, 2, NO_SYNC_STEPS, 2);
      results.forEach(({ noSync }, rank) => {
        const diff = maxDiff(noSync.final, reference);
        assert.ok(diff <= 1e-5, `rank ${rank} differs from the reference by ${diff}`);
      });
    },
  );
});
