/**
 * Honest counters and messages: --max-steps counts over the whole run and its snapshot resumes in
 * the middle of the epoch, bit-exactly; a snapshot of another model is refused with exit 2 naming
 * what differs; the launcher's per-rank logs stay in the run folder, said at the start; and on a
 * terminal rank 0's progress line is redrawn through the launcher.
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { markedProcesses, markerEnv, ROOT, withTempDir } from "../_harness/processes.ts";
import { freePort } from "../_harness/ranks.ts";
import type { MetricRecord } from "../../src/train/metrics.ts";
import {
  assertBitIdentical,
  assertSucceeded,
  readSaved,
  SMALL_JOB,
  snapshotInfo,
  train,
} from "./_train.ts";

const ONE_PROCESS = ["--nproc-per-node", "1"];

Deno.test("train --max-steps counts steps over the run, and its snapshot resumes mid-epoch bit-exactly", async () => {
  await withTempDir("dtrain_max_steps_", async (dir) => {
    // One process, 2048 samples in batches of 128: 16 steps an epoch.
    const job = (snapshot: string, ...more: string[]) =>
      train([...SMALL_JOB, ...ONE_PROCESS, "--epochs", "2", "--snapshot", snapshot, ...more]);
    const whole = join(dir, "whole", "snap.safetensors");
    assertSucceeded(await job(whole));

    const snapshot = join(dir, "cut", "snap.safetensors");
    const first = await job(snapshot, "--max-steps", "10");
    assertSucceeded(first);
    assert.match(
      first.stdout,
      /^epoch 1\/2 step 10\/10 loss [\d.]+ .* \(stopped by --max-steps\)$/m,
    );
    assert.match(first.stdout, /^done: 0 epochs and step 10 \(--max-steps 10\), loss [\d.]+$/m);
    assert.deepEqual(snapshotInfo(readSaved(snapshot)), {
      ...snapshotInfo(readSaved(snapshot)),
      epochsRun: 0,
      step: 10,
      sampler: { epoch: 0, seed: 3, position: 1280 },
    });

    const second = await job(snapshot, "--max-steps", "20");
    assertSucceeded(second);
    assert.match(second.stdout, /resuming from .* at epoch 0, sample 1280/);
    assert.match(second.stdout, /^epoch 1\/2 step 6\/6 /m, "the rest of epoch 1");
    assert.match(second.stdout, /^epoch 2\/2 step 4\/4 /m);
    assert.match(second.stdout, /^done: 1 epochs and step 20 \(--max-steps 20\)/m);

    const again = await job(snapshot, "--max-steps", "20");
    assertSucceeded(again);
    assert.match(
      again.stdout,
      /nothing left to train \(the snapshot is at step 20; raise --max-steps\)/,
    );

    const rest = await job(snapshot);
    assertSucceeded(rest);
    assert.match(rest.stdout, /resuming from .* at epoch 1, sample 512/);
    assert.match(rest.stdout, /^done: 2 epochs, loss [\d.]+$/m);
    assertBitIdentical(readSaved(snapshot).tensors, readSaved(whole).tensors, "cut at 10 and 20");

    // The record continues across the resumes: every step once, in order.
    const records: MetricRecord[] = (await Deno.readTextFile(join(dir, "cut", "metrics.jsonl")))
      .trimEnd().split("\n").map((l) => JSON.parse(l));
    const steps = records.filter((r) => r.kind === "step").map((r) => r.step);
    assert.deepEqual(steps, [...steps].sort((a, b) => a - b));
    assert.equal(new Set(steps).size, steps.length, `no step twice: ${steps}`);
    assert.ok(steps.includes(10) && steps.includes(20), `${steps}`);
    assert.deepEqual(records.filter((r) => r.kind === "epoch").map((r) => r.step), [16, 32]);
  });
});

Deno.test("train refuses a snapshot of another model or optimizer with exit 2, naming what differs, before any process starts", async () => {
  await withTempDir("dtrain_unfit_", async (dir) => {
    const snapshot = join(dir, "snap.safetensors");
    assertSucceeded(
      await train([...SMALL_JOB, ...ONE_PROCESS, "--epochs", "1", "--snapshot", snapshot]),
    );
    // The default 2 processes: the check runs before the launcher.
    const run = await train([
      ...SMALL_JOB,
      "--hidden",
      "8",
      "--epochs",
      "2",
      "--snapshot",
      snapshot,
    ], {
      timeoutMs: 20_000,
    });
    assert.equal(run.code, 2, run.stderr);
    assert.deepEqual(run.leftovers, []);
    assert.equal(run.stdout, "");
    assert.equal(run.stderr.trimEnd().split("\n").length, 1, `one message: ${run.stderr}`);
    assert.match(
      run.stderr,
      /^train: .*snap\.safetensors: was saved from another model than this configuration builds \(--model, --hidden, --dataset\): \S+ is \[16, 20\] in the snapshot but \[8, 20\] here/,
    );
    assert.deepEqual(run.tempEntries, [], "no launcher started");

    const adamw = await train([...SMALL_JOB, "--optimizer", "adamw", "--snapshot", snapshot], {
      timeoutMs: 20_000,
    });
    assert.equal(adamw.code, 2, adamw.stderr);
    assert.match(
      adamw.stderr,
      /^train: .*: was saved with another optimizer \(hyperparameters dampening, lr, momentum, nesterov, weightDecay\) than --optimizer builds here \(betas, eps, lr, weightDecay\)\n$/,
    );
  });
});

Deno.test("train keeps the launcher's per-rank logs in logs/ beside the snapshot and says so first", async () => {
  await withTempDir("dtrain_logs_", async (dir) => {
    const run = await train([
      ...SMALL_JOB,
      ...["--master-port", String(freePort()), "--epochs", "1"],
      ...["--snapshot", join(dir, "run", "snap.safetensors")],
    ]);
    assertSucceeded(run);
    assert.equal(run.stderr.split("\n")[0], `launch: per-rank logs in ${join(dir, "run", "logs")}`);
    const logs = (await Array.fromAsync(Deno.readDir(join(dir, "run", "logs")))).map((e) => e.name);
    // Each rank's log, and its flight-recorder ledger written at exit (`deno task debug` reads it).
    assert.deepEqual(logs.sort(), [
      "rank_0.ledger.json",
      "rank_0.log",
      "rank_1.ledger.json",
      "rank_1.log",
    ]);
    assert.match(
      await Deno.readTextFile(join(dir, "run", "logs", "rank_0.log")),
      /^done: 1 epochs/m,
    );
    assert.deepEqual(run.tempEntries, [], "nothing left in the temporary folder");
  });
});

Deno.test({
  name: "train on a terminal redraws rank 0's progress line through the launcher",
  ignore: Deno.build.os !== "linux",
  fn: async () => {
    await withTempDir("dtrain_tty_", async (dir) => {
      const marker = crypto.randomUUID();
      const command = [
        Deno.execPath(),
        ...["run", "-A", "--v8-flags=--expose-gc", `${ROOT}src/train/main.ts`],
        ...SMALL_JOB,
        ...["--master-port", String(freePort()), "--epochs", "1", "--log-every", "4"],
        ...["--snapshot", join(dir, "snap.safetensors")],
      ].map((a) => `'${a}'`).join(" ");
      // util-linux's script(1) runs the job on a pseudo-terminal and copies what it shows.
      // Two ranks of 1024 samples in batches of 128: 8 steps.
      const out = await new Deno.Command("script", {
        args: ["-qfec", command, "/dev/null"],
        env: { ...markerEnv(marker), NO_COLOR: "1" },
        stdin: "null",
        stdout: "piped",
        stderr: "piped",
        signal: AbortSignal.timeout(60_000),
      }).output();
      assert.deepEqual(markedProcesses(marker), [], "no process left behind");
      const shown = new TextDecoder().decode(out.stdout);
      assert.ok(out.success, shown);
      // A carriage return and "erase in line" (ESC [ K) before the prefix: a redraw.
      assert.match(shown, new RegExp(String.raw`\r\u001b\[K\[rank 0\] epoch 1/1 step \d+/8 `));
      assert.doesNotMatch(shown, /\n\[rank 0\] epoch 1\/1 step 4\/8 /, "no plain step line");
      assert.match(shown, /\[rank 0\] epoch 1\/1 step 8\/8 loss [\d.]+ /);
      assert.match(shown, /\[rank 0\] done: 1 epochs/);
    });
  },
});
