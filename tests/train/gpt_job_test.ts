// The train job's GPT on the fortunes corpus (`--model gpt --dataset text`): a small model over 2
// DDP ranks prints its validation loss each epoch, ends with the `done: ..., validation loss X`
// line and a generated sample, and resumes from its snapshot; the config is checked.
import assert from "node:assert/strict";
import { join, resolve } from "node:path";
import { withTempDir } from "../_harness/processes.ts";
import { freePort } from "../_harness/ranks.ts";
import { parseTrainArgs } from "../../src/train/config.ts";
import { assertSucceeded, readSaved, smallCorpus, snapshotInfo, train } from "./_train.ts";

const TINY_GPT = [
  "--model",
  "gpt",
  "--n-layer",
  "1",
  "--n-head",
  "2",
  "--n-embd",
  "16",
  "--block-size",
  "32",
  "--batch-size",
  "8",
  "--threads",
  "1",
];

Deno.test("train --model gpt trains a GPT on the fortunes over 2 ranks, reports validation loss and a sample", async () => {
  await withTempDir("dtrain_gpt_job_", async (dir) => {
    const snapshot = join(dir, "gpt.safetensors");
    const job = [...TINY_GPT, "--data-root", await smallCorpus(dir), "--snapshot", snapshot];
    const port = () => ["--master-port", String(freePort())];
    const run = await train([...job, ...port(), "--epochs", "2"], { timeoutMs: 120_000 });
    assertSucceeded(run);
    const epochs = [
      ...run.stdout.matchAll(/epoch (\d)\/2 step (\d+)\/\2 .* validation loss ([\d.]+)/g),
    ];
    assert.deepEqual(epochs.map((m) => m[1]), ["1", "2"], run.stdout);
    const [first, second] = epochs.map((m) => Number(m[3]));
    assert.ok(second < first, `validation loss did not fall: ${first} then ${second}`);
    assert.ok(first < Math.log(256), `a trained model beats uniform bytes: ${first}`);
    const done = /done: 2 epochs, loss [\d.]+, validation loss ([\d.]+)/.exec(run.stdout);
    assert.ok(done, run.stdout);
    assert.equal(Number(done[1]), second);
    assert.match(run.stdout, /sample:\n[\s\S]{20,}/);
    const records = (await Deno.readTextFile(join(dir, "metrics.jsonl"))).trim().split("\n")
      .map((line) => JSON.parse(line)).filter((r) => r.kind === "epoch");
    assert.deepEqual(records.map((r) => r.epoch), [1, 2]);
    assert.ok(
      records.every((r) => Math.abs(r.validationLoss - [first, second][r.epoch - 1]) < 1e-4),
    );
    const saved = readSaved(snapshot);
    assert.equal(snapshotInfo(saved).epochsRun, 2);
    assert.ok(
      "model.transformer.wte.weight" in saved.tensors && "model.lm_head.weight" in saved.tensors,
    );

    const again = await train([...job, ...port(), "--epochs", "3"], { timeoutMs: 120_000 });
    assertSucceeded(again);
    assert.match(again.stdout, /resuming from .* at epoch 2/);
    assert.match(again.stdout, /done: 3 epochs/);
  });
});

Deno.test("--model gpt brings its own defaults, and text and gpt only go together", () => {
  const config = parseTrainArgs(["--model", "gpt"]);
  assert.ok(config !== "help");
  assert.equal(config.dataset, "text");
  assert.equal(config.optimizer, "adamw");
  assert.equal(config.snapshot, resolve("runs/gpt/snapshot.safetensors"));
  const flagsWin = parseTrainArgs(["--model", "gpt", "--lr", "0.01", "--optimizer", "sgd"]);
  assert.ok(flagsWin !== "help");
  assert.deepEqual([flagsWin.lr, flagsWin.optimizer], [0.01, "sgd"]);
  assert.throws(
    () => parseTrainArgs(["--model", "gpt", "--dataset", "synthetic"]),
    /dataset: the gpt model trains on --dataset text, got "synthetic"/,
  );
  assert.throws(
    () => parseTrainArgs(["--dataset", "text"]),
    /model: --dataset text needs --model gpt, got "mlp"/,
  );
  assert.throws(
    () => parseTrainArgs(["--model", "gpt", "--n-embd", "30", "--n-head", "4"]),
    /--n-head: must divide --n-embd \(30\), got 4/,
  );
});
