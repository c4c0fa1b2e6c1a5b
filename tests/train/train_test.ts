// The train job end to end on synthetic data: the positional form, what a snapshot holds, resuming
// bit-exactly in one process and in two with DDP, and a kill in the middle of a snapshot write.
import assert from "node:assert/strict";
import { join } from "node:path";
import { freePort } from "../_harness/ranks.ts";
import { withTempDir } from "../_harness/processes.ts";
import {
  assertBitIdentical,
  assertSucceeded,
  HOOKED_MAIN,
  modelWeights,
  readSaved,
  SMALL_JOB,
  snapshotInfo,
  train,
} from "./_train.ts";
import { runDeno } from "../_harness/processes.ts";

const ONE_PROCESS = ["--nproc-per-node", "1"];

Deno.test("train EPOCHS SAVE_EVERY --batch-size N trains and snapshots every SAVE_EVERY epochs and at the end", async () => {
  await withTempDir("dtrain_train_", async (dir) => {
    const snapshot = join(dir, "run", "snap.safetensors");
    const job = [
      ...ONE_PROCESS,
      "--dataset",
      "synthetic",
      "--model",
      "linear",
      "--snapshot",
      snapshot,
    ];
    const run = await train(["3", "2", "--batch-size", "256", ...job]);
    assertSucceeded(run);
    for (const epoch of [1, 2, 3]) {
      assert.match(run.stdout, new RegExp(`^epoch ${epoch}/3 step 8/8 loss [\\d.]+ `, "m"));
    }
    assert.deepEqual(
      [...run.stdout.matchAll(/^epoch (\d+): snapshot saved to (.*)$/gm)].map((m) => [m[1], m[2]]),
      [["2", snapshot], ["3", snapshot]],
    );
    assert.match(run.stdout, /^done: 3 epochs, loss [\d.]+$/m);

    const saved = readSaved(snapshot);
    assert.deepEqual(Object.keys(modelWeights(saved)).sort(), ["bias", "weight"]);
    assert.deepEqual(saved.shapes["model.weight"], [1, 20]);
    assert.deepEqual(saved.shapes["model.bias"], [1]);
    const others = Object.keys(saved.tensors).filter((n) => !n.startsWith("model."));
    assert.ok(others.length > 0, "momentum buffers are saved");
    for (const name of others) assert.match(name, /^optimizer\.\d+\.\w+$/);
    assert.equal(saved.metadata.format, "pt");
    assert.equal(snapshotInfo(saved).epochsRun, 3);

    const again = await train(["3", "2", ...job]);
    assertSucceeded(again);
    assert.match(
      again.stdout,
      /^done: 3 epochs, nothing left to train \(the snapshot has 3\/3 epochs; raise --epochs or remove .*\)$/m,
    );
    assert.doesNotMatch(again.stdout, /step/);
  });
});

/** Trains `SMALL_JOB` for `epochs` on `snapshot`, in one process or two. */
function trainSmall(snapshot: string, epochs: number, processes: number, dir: string) {
  const distributed = processes > 1
    ? ["--master-port", String(freePort()), "--log-dir", join(dir, "logs")]
    : [];
  return train([
    ...SMALL_JOB,
    "--nproc-per-node",
    String(processes),
    ...distributed,
    "--epochs",
    String(epochs),
    "--snapshot",
    snapshot,
  ]);
}

for (const processes of [1, 2]) {
  Deno.test(`train resumed after 1 of 3 epochs ends bit-identical to an uninterrupted run (${processes} process${processes > 1 ? "es with DDP" : ""})`, async () => {
    await withTempDir("dtrain_resume_", async (dir) => {
      const whole = join(dir, "whole.safetensors");
      const split = join(dir, "split.safetensors");
      assertSucceeded(await trainSmall(whole, 3, processes, dir));
      assertSucceeded(await trainSmall(split, 1, processes, dir));
      assert.equal(snapshotInfo(readSaved(split)).epochsRun, 1);
      const resumed = await trainSmall(split, 3, processes, dir);
      assertSucceeded(resumed);
      assert.ok(resumed.stdout.includes(`resuming from ${split} at epoch 1`), resumed.stdout);
      assert.doesNotMatch(resumed.stdout, /epoch 1\/3 step/, "epoch 1 is not run again");

      const a = readSaved(whole), b = readSaved(split);
      assert.equal(snapshotInfo(b).epochsRun, 3);
      // Model and optimizer state alike.
      assertBitIdentical(b.tensors, a.tensors, "resumed vs uninterrupted");
    });
  });
}

Deno.test("train killed while writing a snapshot leaves the previous one intact, and resumes from it", async () => {
  await withTempDir("dtrain_kill_", async (dir) => {
    const whole = join(dir, "whole.safetensors");
    const snapshot = join(dir, "run", "snap.safetensors");
    assertSucceeded(await trainSmall(whole, 3, 1, dir));

    const killed = await runDeno({
      timeoutMs: 60_000,
      env: { DTRAIN_TEST_KILL_IN_SNAPSHOT: "2" },
      args: [HOOKED_MAIN, ...SMALL_JOB, ...ONE_PROCESS, "--epochs", "3", "--snapshot", snapshot],
    });
    assert.equal(killed.signal, "SIGKILL", `${killed.stderr}\n${killed.stdout}`);
    assert.match(killed.stderr, /fault injection: SIGKILL while writing snapshot 2/);
    assert.deepEqual(killed.leftovers, []);

    const files = (await Array.fromAsync(Deno.readDir(join(dir, "run")))).map((e) => e.name);
    const partial = files.filter((f) => /^\.snap\.safetensors\..*\.tmp$/.test(f));
    assert.equal(partial.length, 1, `the interrupted write's temporary file: ${files}`);
    const partialSize = (await Deno.stat(join(dir, "run", partial[0]))).size;
    assert.ok(partialSize < (await Deno.stat(snapshot)).size, "the write was cut short");
    assert.equal(snapshotInfo(readSaved(snapshot)).epochsRun, 1, "epoch 1's snapshot is intact");

    const resumed = await train([
      ...SMALL_JOB,
      ...ONE_PROCESS,
      "--epochs",
      "3",
      "--snapshot",
      snapshot,
    ]);
    assertSucceeded(resumed);
    assert.ok(resumed.stdout.includes("at epoch 1"), resumed.stdout);
    assertBitIdentical(readSaved(snapshot).tensors, readSaved(whole).tensors, "after the kill");
    const after = (await Array.fromAsync(Deno.readDir(join(dir, "run")))).map((e) => e.name);
    assert.deepEqual(
      after.sort(),
      ["metrics.jsonl", "report.html", "snap.safetensors"],
      "the resumed job removed the half-written file",
    );
  });
});
