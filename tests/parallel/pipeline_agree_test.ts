// Pipeline ranks that build different schedules, checked with real rank processes: a rank with
// 4 microbatches among ranks with 8 (over 2, 3 and 4 ranks), a rank running 1F1B among GPipe
// ranks, and a last stage whose target has other rows than the first stage's input. Every rank
// names the difference within a second of the first step, where before the fix it read as a
// cross-entropy shape error (2 ranks), a tag mismatch (3) or timeouts (4).
import assert from "node:assert/strict";
import { type RankResult, runRanks } from "../_harness/ranks.ts";
import { describe, markedProcesses, markerEnv } from "../_harness/processes.ts";

const worker = new URL("./workers/pipeline_agree.ts", import.meta.url);

/** Runs CASE over `worldSize` ranks, rank `odd` the odd one out; checks nothing is left. */
async function runCase(worldSize: number, kase: string, odd: number): Promise<RankResult[]> {
  const marker = crypto.randomUUID();
  const runs = await runRanks({
    worker,
    worldSize,
    timeoutMs: 90_000,
    env: () => ({ CASE: kase, ODD_RANK: String(odd), ...markerEnv(marker) }),
  });
  const left = markedProcesses(marker);
  assert.deepEqual(left, [], `left behind: ${describe(left)}`);
  return runs;
}

/** Every rank failed its first step with `pattern`, a "mismatch", within a second. */
function assertNamedEverywhere(runs: RankResult[], pattern: RegExp): void {
  for (const run of runs) {
    const what = `rank ${run.rank}: ${run.stderr}`;
    assert.equal(run.code, 0, what);
    const result = run.result!;
    assert.match(String(result.failed), pattern, `rank ${run.rank}`);
    assert.equal(result.code, "mismatch", `rank ${run.rank}`);
    assert.ok((result.ms as number) < 1000, `rank ${run.rank} took ${result.ms} ms to fail`);
  }
}

for (const worldSize of [2, 3, 4]) {
  Deno.test(`pipeline over ${worldSize} ranks: a rank with 4 microbatches among ranks with 8 is named on every rank within a second`, async () => {
    const runs = await runCase(worldSize, "microbatches", 1);
    const others = [0, 2, 3].filter((r) => r < worldSize);
    // The smaller camp first (rank order between camps of one rank each).
    const said = others.length === 1
      ? "rank 0 has 8, rank 1 has 4"
      : `rank 1 has 4, ranks ${others.slice(0, -1).join(", ")} and ${others.at(-1)} have 8`;
    assertNamedEverywhere(
      runs,
      new RegExp(
        `^ScheduleGPipe: the ranks disagree: microbatches: ${said}; every rank of the ` +
          `pipeline must build the same schedule`,
      ),
    );
  });
}

Deno.test("pipeline over 3 ranks: a rank running 1F1B among GPipe ranks is named on every rank within a second", async () => {
  const runs = await runCase(3, "schedule", 1);
  assertNamedEverywhere(
    runs,
    /the ranks disagree: schedule: rank 1 has Schedule1F1B, ranks 0 and 2 have ScheduleGPipe; every rank/,
  );
});

Deno.test("pipeline over 2 ranks: a last stage's target with other rows than the first stage's input is named on both within a second", async () => {
  const runs = await runCase(2, "rows", 1);
  assertNamedEverywhere(
    runs,
    /ScheduleGPipe: the ranks disagree: batch rows \(the input's on the first stage, the target's on the last\): rank 0 has 8, rank 1 has 16;/,
  );
});
