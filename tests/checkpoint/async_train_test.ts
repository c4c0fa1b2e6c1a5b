// The train job's --async-snapshots: a 2-rank --strategy fsdp run whose periodic snapshots are
// written in the background while it trains leaves, when it exits, the snapshot of its last step
// committed and byte for byte the one a run with synchronous snapshots writes; the flag is
// refused for --strategy ddp, whose snapshot is one file.
import assert from "node:assert/strict";
import { join } from "node:path";
import { withTempDir } from "../_harness/processes.ts";
import { ConfigError } from "../../src/train/config.ts";
import { parseTrainArgs } from "../../src/train/config.ts";
import { assertSucceeded, launchHooked, SMALL_JOB } from "./../train/_train.ts";
import { digests } from "./_digests.ts";
import { listing } from "./_listing.ts";

Deno.test("train --async-snapshots on 2 fsdp ranks commits its last snapshot before exiting, byte for byte the synchronous one", async () => {
  await withTempDir("dtrain_async_train_", async (dir) => {
    const job = (snapshot: string) => [
      ...SMALL_JOB,
      ...["--optimizer", "adamw", "--strategy", "fsdp", "--epochs", "1"],
      ...["--save-every-steps", "2", "--max-steps", "5", "--snapshot", snapshot],
    ];
    const snapshots: Record<string, Record<string, string>> = {};
    for (const mode of ["false", "true"]) {
      const snapshot = join(dir, `async-${mode}`, "snap");
      const run = await launchHooked(["--nproc-per-node", "2"], [
        ...job(snapshot),
        ...["--async-snapshots", mode],
      ]);
      assertSucceeded(run);
      const index = JSON.parse(Deno.readTextFileSync(join(snapshot, "index.json")));
      // Steps 2 and 4, then the stop at step 5: three generations.
      assert.deepEqual([index.generation, index.extra.step], [3, 5], `--async-snapshots ${mode}`);
      assert.deepEqual(listing(snapshot).filter((f) => !f.startsWith("gen-3/")), [
        "gen-3",
        "index.json",
      ]);
      snapshots[mode] = await digests(snapshot);
    }
    assert.deepEqual(snapshots.true, snapshots.false);
  });
});

Deno.test("train refuses --async-snapshots for --strategy ddp, whose snapshot is one file", () => {
  assert.throws(
    () => parseTrainArgs(["--async-snapshots", "true"]),
    (e) => e instanceof ConfigError && /sharded snapshots in the background/.test(e.message),
  );
  const config = parseTrainArgs(["--async-snapshots", "true", "--strategy", "fsdp"]);
  assert.ok(config !== "help" && config.asyncSnapshots);
});
