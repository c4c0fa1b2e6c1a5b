// Asynchronous sharded saves on 2 real rank processes: what a save holds is the state when it was
// issued, though training changed the model while it was written; a save issued before the last
// one finished waits for it; a save whose write fails on one rank fails on both and commits
// nothing; only the last generation's files remain, and it loads here.
import assert from "node:assert/strict";
import { assertAllOk, runRanks } from "../_harness/ranks.ts";
import { describe, markedProcesses, markerEnv } from "../_harness/processes.ts";
import { loadSharded } from "../../src/checkpoint/mod.ts";
import { buildModel, buildOptimizer, stateValues } from "../parallel/workers/fsdp_problem.ts";
import { listing } from "./_listing.ts";

type Params = Record<string, number[]>;

Deno.test("asynchronous sharded saves on 2 ranks hold the state they were issued with while training goes on, and each waits for the last", async () => {
  const dir = Deno.makeTempDirSync({ prefix: "dtrain_async_save_" });
  try {
    const marker = crypto.randomUUID();
    const runs = await runRanks({
      worker: new URL("./async_save_worker.ts", import.meta.url),
      worldSize: 2,
      timeoutMs: 60_000,
      env: {
        DIR: dir,
        FAIL_RANK: "1",
        CRASH_RANK: "1",
        CRASH_POINT: "shard-write-fails",
        ...markerEnv(marker),
      },
    });
    assert.deepEqual(markedProcesses(marker), [], describe(markedProcesses(marker)));
    assertAllOk(runs);
    const results = runs.map((r) =>
      r.result as {
        saved1: Params;
        loaded1: Params;
        extra1: Record<string, unknown>;
        saved5: Params;
        failure: string;
        extraAfterFailure: Record<string, unknown>;
        generations: number[];
      }
    );
    const { saved1, loaded1, extra1, saved5, generations } = results[0];
    assert.deepEqual(extra1, { step: 1 });
    assert.deepEqual(loaded1, saved1, "the first save holds the state it was issued with");
    // The fourth save's write failed on rank 1: both ranks' saves fail with its error, nothing is
    // committed, and the fifth commits generation 4 again, from an emptied folder.
    assert.equal(results[1].failure, "No space left on device (injected)");
    for (const r of results) assert.deepEqual(r.extraAfterFailure, { step: 3 }, "the third loads");
    assert.equal(
      results[0].failure,
      "rank 1's part of the save failed: No space left on device (injected)",
    );
    assert.deepEqual(generations, [1, 2, 3, 4, 4]);
    assert.deepEqual(listing(dir), [
      "gen-4",
      "gen-4/rank-0.json",
      "gen-4/rank-0.safetensors",
      "gen-4/rank-1.json",
      "gen-4/rank-1.safetensors",
      "index.json",
    ]);
    const model = buildModel("mlp");
    const extra = loadSharded(dir, { model, optimizer: buildOptimizer(model.parameters()) });
    assert.deepEqual(extra, { step: 5 });
    assert.deepEqual(stateValues(model.stateDict()), saved5);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});
