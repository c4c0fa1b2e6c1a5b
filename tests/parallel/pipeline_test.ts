// Pipeline parallelism across real rank processes, checked against one process on the whole
// batch: the tiny GPT over 2 and 4 ranks under GPipe, 1F1B (a stage per rank) and
// Interleaved1F1B (two per rank: 4 and 8 stages), 8 microbatches, 3 AdamW steps: losses,
// first-step gradients and final weights within 1e-5; the Chrome trace's span per action; and a
// stage killed mid-schedule, named by the others within the timeout.
import assert from "node:assert/strict";
import { assertAllOk, type RankResult, runRanks } from "../_harness/ranks.ts";
import { describe, markedProcesses, markerEnv } from "../_harness/processes.ts";
import { assertSame, STEPS, type Trace, trainWhole } from "./workers/pipeline_problem.ts";

const worker = new URL("./workers/pipeline.ts", import.meta.url);

async function runCase(worldSize: number, env: Record<string, string>): Promise<RankResult[]> {
  const marker = crypto.randomUUID();
  const runs = await runRanks({
    worker,
    worldSize,
    timeoutMs: 120_000,
    env: () => ({ ...env, ...markerEnv(marker) }),
  });
  const left = markedProcesses(marker);
  assert.deepEqual(left, [], `left behind: ${describe(left)}`);
  return runs;
}

const reference = trainWhole();

/** The span names rank `rank` recorded in its trace file. */
function spanNames(path: string, rank: number): string[] {
  const trace = JSON.parse(Deno.readTextFileSync(`${path}.rank${rank}.json`));
  return (trace.traceEvents as { name: string; ph: string }[])
    .filter((e) => e.ph === "X").map((e) => e.name);
}

for (const worldSize of [2, 4]) {
  Deno.test(`pipeline over ${worldSize} ranks: GPipe, 1F1B and Interleaved1F1B train the GPT like one process on the whole batch`, async () => {
    const dir = await Deno.makeTempDir();
    const profile = `${dir}/trace.json`;
    try {
      const runs = await runCase(worldSize, { CASE: "train", DTRAIN_PROFILE: profile });
      assertAllOk(runs);
      for (const kind of ["gpipe", "1f1b", "interleaved"]) {
        const names = new Set<string>();
        let worst = 0;
        for (const run of runs) {
          const got = (run.result!.runs as Record<string, Trace>)[kind];
          const what = `${kind}, rank ${run.rank} of ${worldSize}`;
          worst = Math.max(worst, assertSame(got, reference, what));
          for (const name of Object.keys(got.final)) names.add(name);
          const last = run.rank === worldSize - 1;
          assert.equal(got.losses.length, last ? STEPS : 0, `${what}: losses on the last stage`);
        }
        assert.deepEqual([...names].sort(), Object.keys(reference.final).sort(), kind);
        console.log(`${worldSize} ranks, ${kind}: worst relative error ${worst.toExponential(1)}`);
      }
      for (const run of runs.slice(1)) {
        const errors = run.result!.errors as Record<string, string>;
        assert.match(
          errors.stage0,
          new RegExp(
            `stage 0 runs on group rank 0 \\(stage mod ${worldSize} ranks\\), not on this process's group rank ${run.rank}`,
          ),
        );
        assert.match(
          errors.interleaved,
          new RegExp(
            `group rank ${run.rank} of ${worldSize} holds stages \\[${run.rank},${
              run.rank + worldSize
            }\\] of ${2 * worldSize}, got \\[${run.rank}\\]`,
          ),
        );
      }
      // Each action is a span: rank r ran F0..F7 and B0..B7 of its stages, every step; a stage
      // that receives waits in spans of its own, so that the bubble shows between computes.
      const waits = spanNames(profile, 1);
      assert.ok(waits.includes("recv F0 s1"), "rank 1 waits for stage 0's activations");
      if (worldSize > 2) assert.ok(waits.includes("recv B0 s1"), "and for stage 2's gradients");
      for (let rank = 0; rank < worldSize; rank++) {
        const names = spanNames(profile, rank);
        for (const stage of [rank, rank + worldSize]) {
          for (let mb = 0; mb < 8; mb++) {
            // The single-stage schedules run `rank` only; interleaved also rank + worldSize.
            const runs = stage === rank ? 3 * STEPS : STEPS;
            for (const type of ["F", "B"]) {
              const n = names.filter((x) => x === `${type}${mb} s${stage}`).length;
              assert.equal(n, runs, `rank ${rank}: ${type}${mb} s${stage} spans`);
            }
          }
        }
      }
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  });
}

Deno.test("a stage killed in the middle of a 1F1B step is named by every other stage within the timeout", async () => {
  const timeoutMs = 4000;
  const started = performance.now();
  const runs = await runCase(4, {
    CASE: "kill",
    KILL_RANK: "2",
    TEST_TIMEOUT_MS: String(timeoutMs),
  });
  const elapsed = performance.now() - started;
  assert.equal(runs[2].signal, "SIGKILL", `rank 2: ${runs[2].stderr}`);
  for (const run of [runs[0], runs[1], runs[3]]) {
    assert.equal(run.code, 1, `rank ${run.rank}: ${run.stderr}`);
    const error = String(run.result?.error);
    assert.match(error, /Schedule1F1B: stage \d on rank \d failed at \d[FB]\d/, `rank ${run.rank}`);
    // Named among the dead by the diagnosis: a closed connection to a dead peer is always a
    // "peer" failure, on either transport, so every rank diagnoses it.
    const named = /\b(rank 2|ranks [\d, ]*\b2\b[\d, ]*) died/;
    assert.match(error, named, `rank ${run.rank} does not name rank 2: ${error}`);
    assert.ok(typeof run.result?.code === "string", `rank ${run.rank}: the transport's code`);
    assert.ok(
      run.elapsedMs - runs[2].elapsedMs < 2 * timeoutMs + 3000,
      `rank ${run.rank} took long`,
    );
  }
  assert.ok(elapsed < 60_000, `took ${elapsed | 0} ms`);
});
