// DistributedDataParallel across 2 and 3 real rank processes, checked against one process that
// trains on the whole global batch: with mean losses, the average of the ranks' gradients is the
// gradient of the global batch.
import assert from "node:assert/strict";
import { assertAllOk, type RankResult, runRanks } from "../_harness/ranks.ts";
import { describe, markedProcesses, markerEnv } from "../_harness/processes.ts";
import {
  localGradients,
  MICRO_BATCHES,
  NO_SYNC_STEPS,
  ROWS,
  SMALL_BUCKET_COUNT,
  STEPS,
  trainReference,
} from "./workers/problem.ts";

const worker = new URL("./workers/ddp.ts", import.meta.url);

type Params = Record<string, number[]>;

/** Runs the worker's `scenario` on `worldSize` ranks; fails if a process outlives the run. */
async function runScenario(scenario: string, worldSize: number): Promise<RankResult[]> {
  const marker = crypto.randomUUID();
  const runs = await runRanks({
    worker,
    worldSize,
    timeoutMs: 60_000,
    env: { CASE: scenario, ...markerEnv(marker) },
  });
  const left = markedProcesses(marker);
  assert.deepEqual(left, [], `left behind: ${describe(left)}`);
  return runs;
}

/** The largest absolute difference between `actual` and `expected`, with where it is. */
function maxDiff(actual: Params, expected: Params): { diff: number; at: string } {
  assert.deepEqual(Object.keys(actual), Object.keys(expected), "parameter names");
  let worst = { diff: 0, at: "" };
  for (const [name, want] of Object.entries(expected)) {
    const got = actual[name];
    assert.equal(got.length, want.length, `${name}: length`);
    for (let i = 0; i < want.length; i++) {
      const diff = Math.abs(got[i] - want[i]);
      if (!(diff <= worst.diff)) worst = { diff, at: `${name}[${i}]: ${got[i]} vs ${want[i]}` };
    }
  }
  return worst;
}

function assertClose(actual: Params, expected: Params, tolerance: number, what: string): void {
  const { diff, at } = maxDiff(actual, expected);
  assert.ok(diff <= tolerance, `${what}: differs by ${diff} > ${tolerance} at ${at}`);
}

for (const size of [2, 3]) {
  Deno.test(`DDP across ${size} ranks trains like one process on the concatenated batches`, async (t) => {
    const runs = await runScenario("train", size);
    assertAllOk(runs);
    const results = runs.map((r) =>
      r.result as {
        multi: { before: Params; after: Params; final: Params; hookCalls: Record<string, number> };
        single: { final: Params; stats: Record<string, number> };
        noSync: { firstGrads: Params; final: Params };
      } & { multi: { stats: Record<string, number> } }
    );

    await t.step(
      "create() broadcasts rank 0's parameters to ranks initialised from other seeds",
      () => {
        const rank0 = results[0].multi.before;
        results.forEach(({ multi }, rank) => {
          if (rank > 0) {
            assert.ok(
              maxDiff(multi.before, rank0).diff > 0,
              `rank ${rank} started from its own seed`,
            );
          }
          assert.deepEqual(multi.after, rank0, `rank ${rank} holds rank 0's parameters`);
        });
      },
    );

    await t.step(
      `${STEPS} steps over ${SMALL_BUCKET_COUNT} buckets match the large-batch reference (1e-5)`,
      () => {
        const reference = trainReference(1000, size, STEPS);
        results.forEach(({ multi }, rank) => {
          assertClose(multi.final, reference, 1e-5, `rank ${rank}`);
          assert.deepEqual(
            multi.final,
            results[0].multi.final,
            `rank ${rank} equals rank 0 exactly`,
          );
        });
        assert.ok(maxDiff(reference, results[0].multi.before).diff > 0.01, "training moved them");
      },
    );

    await t.step("one bucket gives the same parameters as many buckets", () => {
      results.forEach(({ multi, single }, rank) => {
        // Two ranks' sum is exact in any order; three ranks' may round differently if the
        // backend's summation order depends on the buffer's length.
        if (size === 2) assert.deepEqual(single.final, multi.final, `rank ${rank}`);
        else assertClose(single.final, multi.final, 1e-6, `rank ${rank}`);
      });
    });

    await t.step(
      `noSync over ${MICRO_BATCHES} micro-batches, then a synced one, equals the large-batch step`,
      () => {
        const reference = trainReference(2000, size, NO_SYNC_STEPS, MICRO_BATCHES);
        results.forEach(({ noSync }, rank) => {
          assertClose(noSync.final, reference, 1e-5, `rank ${rank}`);
          const own = localGradients(2000, 0, rank * ROWS, (rank + 1) * ROWS, 1 / MICRO_BATCHES);
          assertClose(
            noSync.firstGrads,
            own,
            1e-7,
            `rank ${rank}'s gradient inside noSync is its own`,
          );
        });
      },
    );

    await t.step(
      "gradient hooks fire once per parameter and backward; lastStats is filled in",
      () => {
        for (const { multi, single } of results) {
          assert.deepEqual(
            Object.values(multi.hookCalls),
            Object.keys(multi.final).map(() => STEPS),
          );
          assert.equal(multi.stats.buckets, SMALL_BUCKET_COUNT);
          assert.equal(single.stats.buckets, 1);
          for (const stats of [multi.stats, single.stats]) {
            assert.ok(stats.backwardMs > 0, `backwardMs ${stats.backwardMs}`);
            assert.ok(stats.exposedCommMs >= 0, `exposedCommMs ${stats.exposedCommMs}`);
            assert.ok(stats.commSpanMs >= stats.exposedCommMs, `commSpanMs ${stats.commSpanMs}`);
          }
        }
      },
    );
  });
}

Deno.test("DDP findUnusedParameters averages in zeros, leaves globally unused gradients null, without it names them; buffers follow rank 0", async (t) => {
  const runs = await runScenario("unused", 2);
  assertAllOk(runs);
  const results = runs.map((r) =>
    r.result as {
      steps: { grads: Params; localGrads: Params }[];
      seen: number[];
      error: string;
      decay: { before: Params; after: Params };
      accumulated: { grads: Params; localGrads: Params };
    }
  );
  const names = ["used.weight", "used.bias", "gated.weight", "gated.bias"];

  await t.step(
    "each gradient is the ranks' mean, a rank that did not use a parameter adding 0",
    () => {
      for (let step = 0; step < 3; step++) {
        const expected: Params = {};
        for (const name of names) {
          const [own0, own1] = results.map((r) => r.steps[step].localGrads[name]);
          if (own0 === undefined && own1 === undefined) continue;
          const length = results[0].steps[step].grads[name].length;
          expected[name] = Array.from(
            { length },
            (_, i) => ((own0?.[i] ?? 0) + (own1?.[i] ?? 0)) / 2,
          );
        }
        results.forEach((r, rank) =>
          assertClose(r.steps[step].grads, expected, 1e-6, `step ${step}, rank ${rank}`)
        );
      }
    },
  );

  await t.step("a parameter no rank used has no gradient (null), as in PyTorch", () => {
    for (const r of results) {
      assert.equal(r.steps[1].localGrads["gated.weight"], undefined, "unused locally");
      assert.equal(r.steps[1].grads["gated.weight"], undefined);
      assert.equal(r.steps[1].grads["gated.bias"], undefined);
      assert.ok(r.steps[1].grads["used.weight"].some((g) => g !== 0));
    }
  });

  await t.step(
    "a parameter used only in a noSync pass keeps its accumulated gradient, averaged over ranks",
    () => {
      const expected: Params = {};
      for (const name of names) {
        const [own0, own1] = results.map((r) => r.accumulated.localGrads[name]);
        expected[name] = own0.map((g, i) => (g + own1[i]) / 2);
      }
      assert.ok(expected["gated.weight"].some((g) => g !== 0), "gated was used in the noSync pass");
      results.forEach((r, rank) =>
        assertClose(r.accumulated.grads, expected, 1e-6, `accumulated, rank ${rank}`)
      );
    },
  );

  await t.step("AdamW's weight decay leaves a parameter no rank used unchanged", () => {
    for (const { decay } of results) {
      assert.deepEqual(decay.after["gated.weight"], decay.before["gated.weight"]);
      assert.deepEqual(decay.after["gated.bias"], decay.before["gated.bias"]);
      assert.notDeepEqual(decay.after["used.weight"], decay.before["used.weight"]);
    }
  });

  await t.step("buffers are rank 0's after create() and after every synchronised backward", () => {
    // Rank 0 adds 1 per forward, rank 1 adds 5, from 100 + rank.
    for (const r of results) assert.deepEqual(r.seen, [100, 101, 102, 103]);
  });

  await t.step(
    "without findUnusedParameters every rank's error names the unused parameters",
    () => {
      for (const r of results) {
        assert.match(
          r.error,
          /parameters received no gradient in this backward: gated\.\w+, gated\.\w+\./,
        );
        assert.match(r.error, /findUnusedParameters: true/);
      }
    },
  );
});

Deno.test("DDP refuses models that differ across 3 ranks, with the same error on every rank", async () => {
  const runs = await runScenario("mismatch", 3);
  assertAllOk(runs);
  runs.forEach(({ result }, rank) => {
    const { shapeError, countError } = result as { shapeError: string; countError: string };
    const [own, other] = rank === 1
      ? ["\\[12, 8\\]", "\\[16, 8\\]"]
      : ["\\[16, 8\\]", "\\[12, 8\\]"];
    assert.match(
      shapeError,
      new RegExp(
        `parameter "0\\.weight" has shape ${other} on rank \\d and ${own} on rank ${rank}`,
      ),
      `rank ${rank}`,
    );
    assert.match(
      countError,
      /rank \d has \d parameters, rank \d has \d; every rank must wrap the same model/,
    );
  });
});
