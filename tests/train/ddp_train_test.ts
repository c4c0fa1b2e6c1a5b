// The train job as a 2-rank DDP job under the launcher: both ranks end with the same weights, a
// worker killed mid-training is recovered by a group restart that ends where an uninterrupted run
// does, a checkout path with spaces works, and ranks that resumed differently are refused.
import assert from "node:assert/strict";
import { join } from "node:path";
import { freePort } from "../_harness/ranks.ts";
import { ROOT, runDeno, withTempDir } from "../_harness/processes.ts";
import {
  assertBitIdentical,
  assertSucceeded,
  launchHooked,
  modelWeights,
  readSaved,
  SMALL_JOB,
  snapshotInfo,
  train,
} from "./_train.ts";

const TWO_RANKS = ["--nproc-per-node", "2"];

/** Reads both ranks' dumped weights and checks that they equal each other and the snapshot. */
function assertRanksAgree(dir: string, snapshot: string): void {
  const [rank0, rank1] = [0, 1].map((r) => readSaved(join(dir, `rank${r}.safetensors`)).tensors);
  assertBitIdentical(rank1, rank0, "rank 1 vs rank 0");
  assertBitIdentical(modelWeights(readSaved(snapshot)), rank0, "snapshot vs rank 0");
}

Deno.test("train --nproc-per-node 2: both DDP ranks end with identical weights, rank 0 snapshots them", async () => {
  await withTempDir("dtrain_ddp_train_", async (dir) => {
    const snapshot = join(dir, "snap.safetensors");
    const run = await train([
      ...SMALL_JOB,
      ...TWO_RANKS,
      "--master-port",
      String(freePort()),
      "--epochs",
      "2",
      "--snapshot",
      snapshot,
    ], { env: { DTRAIN_WEIGHTS_DUMP: dir } });
    assertSucceeded(run);
    assert.match(run.stdout, /^\[rank 0\] epoch 2\/2 step 8\/8 /m);
    assert.match(run.stdout, /^\[rank 0\] done: 2 epochs/m);
    assert.doesNotMatch(run.stdout, /^\[rank 1\] /m, "only rank 0 prints");
    assert.equal(snapshotInfo(readSaved(snapshot)).epochsRun, 2);
    assertRanksAgree(dir, snapshot);
  });
});

Deno.test("train started from a path with spaces launches its workers from that path", async () => {
  await withTempDir("dtrain_ddp_spaces_", async (dir) => {
    const repo = join(dir, "a checkout with spaces");
    await Deno.symlink(ROOT, repo);
    const run = await runDeno({
      timeoutMs: 60_000,
      args: [
        join(repo, "src", "train", "main.ts"),
        ...SMALL_JOB,
        ...TWO_RANKS,
        "--master-port",
        String(freePort()),
        "--epochs",
        "1",
        "--snapshot",
        join(dir, "snap.safetensors"),
      ],
    });
    assertSucceeded(run);
    assert.match(run.stdout, /^\[rank 0\] done: 1 epochs/m);
  });
});

Deno.test("train refuses to resume when the ranks see different snapshots, naming ranks, epochs and path", async () => {
  await withTempDir("dtrain_ddp_resume_check_", async (dir) => {
    // Two "nodes" whose disks hold different files at the relative path snap.safetensors.
    const [node0, node1] = [join(dir, "node0"), join(dir, "node1")];
    await Deno.mkdir(node0);
    await Deno.mkdir(node1);
    assertSucceeded(
      await train([
        ...SMALL_JOB,
        "--nproc-per-node",
        "1",
        "--epochs",
        "1",
        "--snapshot",
        join(node0, "snap.safetensors"),
      ]),
    );
    const run = await launchHooked(
      TWO_RANKS,
      [...SMALL_JOB, "--epochs", "2", "--max-steps", "1", "--snapshot", "snap.safetensors"],
      { cwd: node0, env: { DTRAIN_TEST_CHDIR_RANK: "1", DTRAIN_TEST_CHDIR: node1 } },
    );
    assert.notEqual(run.code, 0, run.stdout);
    assert.deepEqual(run.leftovers, []);
    const message = new RegExp(
      // Each rank names the absolute path it tried, its own node's.
      "resume: the ranks did not load the same snapshot from \\S+/node[01]/snap\\.safetensors " +
        "\\(rank 0: epoch 1 \\(model checksum [0-9a-f]{8}\\); rank 1: no snapshot\\); " +
        "put --snapshot on a filesystem every node shares",
    );
    for (const rank of [0, 1]) {
      const lines = run.stderr.split("\n").filter((l) => l.startsWith(`[rank ${rank}]`));
      assert.ok(lines.some((l) => message.test(l)), `rank ${rank}:\n${run.stderr}`);
    }
    assert.doesNotMatch(run.stdout, /epoch \d\/2 step/, "no rank trained");
  });
});

Deno.test("train under --max-restarts 1 recovers from a SIGKILLed worker and ends as an uninterrupted run", async () => {
  await withTempDir("dtrain_ddp_restart_", async (dir) => {
    const job = (snapshot: string) => [...SMALL_JOB, "--epochs", "3", "--snapshot", snapshot];
    const whole = join(dir, "whole.safetensors");
    assertSucceeded(await launchHooked(TWO_RANKS, job(whole)));

    // 1024 samples per rank in batches of 128: 8 steps an epoch, so step 12 is in epoch 2.
    const restartedDir = join(dir, "restarted");
    await Deno.mkdir(restartedDir);
    const snapshot = join(restartedDir, "snap.safetensors");
    const run = await launchHooked([...TWO_RANKS, "--max-restarts", "1"], job(snapshot), {
      env: {
        DTRAIN_TEST_CRASH_RANK: "1",
        DTRAIN_TEST_CRASH_AT_STEP: "12",
        DTRAIN_WEIGHTS_DUMP: restartedDir,
      },
    });
    assertSucceeded(run);
    assert.match(run.stderr, /rank 1: fault injection: SIGKILL before step 12/);
    assert.match(
      run.stderr,
      /launch: rank 1 was killed by SIGKILL; restarting the group \(restart 1\/1\)/,
    );
    assert.ok(
      run.stdout.includes(`[rank 0] resuming from ${snapshot} at epoch 1`),
      `the second attempt resumes from epoch 1's snapshot:\n${run.stdout}`,
    );
    assert.equal(snapshotInfo(readSaved(snapshot)).epochsRun, 3);
    assertBitIdentical(readSaved(snapshot).tensors, readSaved(whole).tensors, "restarted run");
    assertRanksAgree(restartedDir, snapshot);
  });
});
