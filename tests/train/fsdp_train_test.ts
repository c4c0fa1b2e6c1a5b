// The train job with --strategy fsdp, as real processes under the launcher: a GPT on 2 ranks ends
// with DDP's weights, gradient norms and validation loss and writes the whole model; a run stopped
// on 2 ranks, resumed on 3 and then on 1 from its sharded snapshot ends where one process trained
// on the same global batches does, every sample of each epoch trained once in the epoch's order;
// and a snapshot of the other strategy is refused, naming the file and both strategies.
import assert from "node:assert/strict";
import { join, resolve } from "node:path";
import { runDeno, withTempDir } from "../_harness/processes.ts";
import { freePort } from "../_harness/ranks.ts";
import { DistributedSampler } from "../../src/data/distributed_sampler.ts";
import { manualSeed } from "../../src/tensor/random.ts";
import { tidy } from "../../src/tensor/scope.ts";
import { parseTrainArgs, type TrainConfig } from "../../src/train/config.ts";
import { buildModel, buildOptimizer, loadTask } from "../../src/train/model.ts";
import type { MetricRecord } from "../../src/train/metrics.ts";
import {
  assertClose,
  assertSucceeded,
  HOOKED_MAIN,
  launchHooked,
  modelWeights,
  readModelFile,
  readSaved,
  SMALL_JOB,
  smallCorpus,
  train,
} from "./_train.ts";

type Weights = Record<string, Float32Array | Int32Array>;
const port = () => ["--master-port", String(freePort())];

async function gradNorms(metrics: string): Promise<number[]> {
  return (await Deno.readTextFile(metrics)).trim().split("\n").map((l) => JSON.parse(l))
    .filter((r: MetricRecord) => r.kind === "step").map((r: MetricRecord) => r.gradNorm!);
}

Deno.test("train --strategy fsdp trains a GPT over 2 ranks to DDP's weights, gradient norms and validation loss, and writes the whole model", async () => {
  await withTempDir("dtrain_fsdp_gpt_", async (dir) => {
    const job = [
      ...["--model", "gpt", "--n-layer", "2", "--n-head", "2", "--n-embd", "16"],
      ...["--block-size", "32", "--batch-size", "8", "--threads", "1", "--epochs", "1"],
      ...["--log-every", "5", "--data-root", await smallCorpus(dir)],
    ];
    const dumps = join(dir, "dumps");
    await Deno.mkdir(dumps);
    const fsdp = await train(
      [...job, ...port(), "--strategy", "fsdp", "--snapshot", join(dir, "fsdp", "snap")],
      { timeoutMs: 120_000, env: { DTRAIN_WEIGHTS_DUMP: dumps } },
    );
    assertSucceeded(fsdp);
    const done = /^\[rank 0\] done: 1 epochs, loss ([\d.]+), validation loss ([\d.]+)$/m
      .exec(fsdp.stdout);
    assert.ok(done, fsdp.stdout);
    const validation = Number(done[2]);
    assert.ok(validation < Math.log(256), `a trained model beats uniform bytes: ${validation}`);
    assert.match(fsdp.stdout, /^\[rank 0\] sample:\n/m);
    const modelFile = join(dir, "fsdp", "model.safetensors");
    assert.ok(fsdp.stdout.includes(`[rank 0] model saved to ${modelFile}`), fsdp.stdout);

    // The sharded snapshot, and the whole model under nanoGPT's names on every rank.
    const index = JSON.parse(await Deno.readTextFile(join(dir, "fsdp", "snap", "index.json")));
    assert.equal(index.worldSize, 2);
    assert.deepEqual([index.extra.strategy, index.extra.epochsRun], ["fsdp", 1]);
    const model = readModelFile(modelFile);
    assert.deepEqual(model.shapes["transformer.h.1.attn.c_attn.weight"], [48, 16]);
    assert.deepEqual(model.shapes["lm_head.weight"], [256, 16]);
    for (const rank of [0, 1]) {
      const dumped = readSaved(join(dumps, `rank${rank}.safetensors`)).tensors;
      assertClose(dumped, model.tensors, `rank ${rank}'s gathered weights`, 0);
    }

    // The same job with DDP: one global batch per step either way.
    const ddpSnapshot = join(dir, "ddp", "snap.safetensors");
    const ddp = await train([...job, ...port(), "--snapshot", ddpSnapshot], { timeoutMs: 120_000 });
    assertSucceeded(ddp);
    const ddpDone = /^\[rank 0\] done: 1 epochs, loss [\d.]+, validation loss ([\d.]+)$/m
      .exec(ddp.stdout);
    assert.ok(ddpDone, ddp.stdout);
    assert.ok(Math.abs(Number(ddpDone[1]) - validation) < 1e-4, `${ddpDone[1]} vs ${validation}`);
    assertClose(model.tensors, modelWeights(readSaved(ddpSnapshot)), "FSDP vs DDP");
    const [ours, theirs] = await Promise.all(
      ["fsdp", "ddp"].map((d) => gradNorms(join(dir, d, "metrics.jsonl"))),
    );
    assert.equal(ours.length, theirs.length);
    ours.forEach((n, i) => assert.ok(Math.abs(n - theirs[i]) <= 1e-5 * theirs[i], `${n} ${i}`));
  });
});

/** What one DistributedSampler pass logged (tests/train/workers/train.ts). */
interface Pass {
  world: number;
  position: number;
  indices: number[];
}

/** Every rank's log of `epoch`'s pass in run folder `logs`. */
function passes(logs: string, world: number, epoch: number): Pass[] {
  return Array.from(
    { length: world },
    (_, rank) => JSON.parse(Deno.readTextFileSync(join(logs, `a0_rank${rank}_e${epoch}.json`))),
  );
}

/** The global batch of step `step` of a pass: each rank's batch, in rank order. */
function globalBatch(ranks: Pass[], step: number, batch: number): number[] {
  return ranks.flatMap((r) => r.indices.slice(step * batch, (step + 1) * batch));
}

/**
 * The part of an epoch's order that a pass trained, `perRank` samples a rank: rank r's k-th index is
 * position `from + k × world + r` of the order.
 */
function trainedOrder(ranks: Pass[], perRank: number): number[] {
  const order: number[] = [];
  for (let k = 0; k < perRank; k++) for (const r of ranks) order.push(r.indices[k]);
  return order;
}

/** One process on the same global batches, from the job's initialisation: what FSDP must equal. */
function trainReference(config: TrainConfig, batches: number[][]): Weights {
  manualSeed(config.seed);
  const task = loadTask(config);
  const model = buildModel(config, task);
  const optimizer = buildOptimizer(config, model);
  for (const indices of batches) {
    tidy(() => {
      const [x, y] = task.train.getBatch(Int32Array.from(indices));
      task.loss(model, x, y).backward();
      optimizer.step();
      optimizer.zeroGrad();
    });
  }
  return Object.fromEntries(
    Object.entries(model.stateDict()).map(([name, t]) => [name, t.toArray() as Float32Array]),
  );
}

Deno.test("train --strategy fsdp stopped on 2 ranks resumes on 3, then on 1, resharded, and ends where one process on the same global batches does, each sample of an epoch trained once in order", async () => {
  await withTempDir("dtrain_fsdp_resume_", async (dir) => {
    const snapshot = join(dir, "run", "snap");
    const job = [
      ...SMALL_JOB,
      ...["--optimizer", "adamw", "--lr", "0.01", "--weight-decay", "0.1"],
      ...["--strategy", "fsdp", "--epochs", "2", "--snapshot", snapshot],
    ];
    const logs = (name: string) => {
      Deno.mkdirSync(join(dir, name));
      return { DTRAIN_TEST_SAMPLE_LOG: join(dir, name) };
    };
    // 2048 samples in batches of 128 a rank: 2 ranks stop after 5 of 8 steps (sample 1280); 3
    // ranks train the 2 steps left of epoch 1 and 2 of epoch 2 (to sample 768); 1 the other 10.
    const first = await launchHooked(["--nproc-per-node", "2"], [...job, "--max-steps", "5"], {
      env: logs("two"),
    });
    assertSucceeded(first);
    assert.match(first.stdout, /^\[rank 0\] done: 0 epochs and step 5 \(--max-steps 5\)/m);
    const second = await launchHooked(["--nproc-per-node", "3"], [...job, "--max-steps", "9"], {
      env: logs("three"),
    });
    assertSucceeded(second);
    assert.match(second.stdout, /resuming from \S+ at epoch 0, sample 1280 \(world size 3\)/);
    assert.match(second.stdout, /^\[rank 0\] epoch 1\/2 step 2\/2 /m);
    assert.match(second.stdout, /^\[rank 0\] done: 1 epochs and step 9 /m);
    const third = await runDeno({
      timeoutMs: 60_000,
      env: logs("one"),
      args: [HOOKED_MAIN, ...job, "--nproc-per-node", "1"],
    });
    assertSucceeded(third);
    assert.match(third.stdout, /resuming from \S+ at epoch 1, sample 768 \(world size 1\)/);
    assert.match(third.stdout, /^epoch 2\/2 step 10\/10 /m);
    assert.match(third.stdout, /^done: 2 epochs, loss [\d.]+$/m);
    const index = JSON.parse(await Deno.readTextFile(join(snapshot, "index.json")));
    assert.deepEqual([index.worldSize, index.extra.step, index.extra.epochsRun], [1, 19, 2]);

    // Each epoch's order goes on where the last run stopped: as one uninterrupted pass.
    const trained = [
      { ranks: passes(join(dir, "two"), 2, 0), steps: 5, from: 0 },
      { ranks: passes(join(dir, "three"), 3, 0), steps: 2, from: 1280 },
      { ranks: passes(join(dir, "three"), 3, 1), steps: 2, from: 0 },
      { ranks: passes(join(dir, "one"), 1, 1), steps: 10, from: 768 },
    ];
    const batches = trained.flatMap(({ ranks, steps, from }) => {
      assert.deepEqual(
        ranks.map((r) => [r.world, r.position]),
        ranks.map(() => [ranks.length, from]),
      );
      return Array.from({ length: steps }, (_, s) => globalBatch(ranks, s, 128));
    });
    for (const [epoch, runs] of [[0, [0, 1]], [1, [2, 3]]] as const) {
      const order = runs.flatMap((i) => trainedOrder(trained[i].ranks, trained[i].steps * 128));
      const uninterrupted = new DistributedSampler({ length: 2048 }, {
        numReplicas: 1,
        rank: 0,
        seed: 3,
      });
      uninterrupted.setEpoch(epoch);
      assert.deepEqual(order, [...uninterrupted.indices()], `epoch ${epoch}'s order`);
    }

    const config = parseTrainArgs(job);
    assert.ok(config !== "help");
    const reference = trainReference(config, batches);
    assertClose(readSaved(join(dir, "run", "model.safetensors")).tensors, reference, "2 → 3 → 1");
  });
});

Deno.test("train refuses a snapshot of the other strategy with exit 2, naming the file and both strategies, and a sharded one that does not fit, naming what", async () => {
  await withTempDir("dtrain_fsdp_refuse_", async (dir) => {
    const ddpSnapshot = join(dir, "ddp.safetensors"), fsdpSnapshot = join(dir, "fsdp");
    const one = ["--nproc-per-node", "1", "--epochs", "1"];
    assertSucceeded(await train([...SMALL_JOB, ...one, "--snapshot", ddpSnapshot]));
    assertSucceeded(
      await train([...SMALL_JOB, ...one, "--strategy", "fsdp", "--snapshot", fsdpSnapshot]),
    );
    const refused = async (args: string[], message: RegExp) => {
      // The default 2 processes: refused before the launcher starts.
      const run = await train([...SMALL_JOB, "--epochs", "2", ...args], { timeoutMs: 20_000 });
      assert.equal(run.code, 2, run.stderr);
      assert.deepEqual(run.leftovers, []);
      assert.equal(run.stdout, "");
      assert.match(run.stderr, message);
      assert.equal(run.stderr.trimEnd().split("\n").length, 1, `one message: ${run.stderr}`);
      assert.deepEqual(run.tempEntries, [], "no launcher started");
    };
    await refused(
      ["--strategy", "fsdp", "--snapshot", ddpSnapshot],
      /^train: \S+ddp\.safetensors: is a file, a --strategy ddp snapshot, but this run is --strategy fsdp, whose snapshot is a sharded folder: resume it with --strategy ddp, or give --snapshot another path$/m,
    );
    await refused(
      ["--snapshot", fsdpSnapshot],
      /^train: \S+fsdp: is a sharded folder, a --strategy fsdp snapshot, but this run is --strategy ddp, whose snapshot is one file: resume it with --strategy fsdp, or give --snapshot another path$/m,
    );
    await refused(
      ["--strategy", "fsdp", "--snapshot", fsdpSnapshot, "--hidden", "8"],
      /^train: \S+fsdp: was saved from another model than this configuration builds \(--model, --hidden, --dataset\): 0\.weight is \[16, 20\] in the snapshot but \[8, 20\] here/,
    );
    // A sharded snapshot's progress record is checked as a file's metadata is.
    const indexFile = join(fsdpSnapshot, "index.json");
    const index = JSON.parse(await Deno.readTextFile(indexFile));
    await Deno.writeTextFile(
      indexFile,
      JSON.stringify({ ...index, extra: { ...index.extra, step: -1 } }),
    );
    await refused(
      ["--strategy", "fsdp", "--snapshot", fsdpSnapshot],
      /^train: \S+fsdp\/index\.json: snapshot metadata field step: Too small: .* \(got -1\)$/m,
    );
    // Launched workers check it again (a job started by the launcher directly).
    const launched = await launchHooked(["--nproc-per-node", "2"], [
      ...SMALL_JOB,
      ...["--strategy", "fsdp", "--epochs", "2", "--snapshot", ddpSnapshot],
    ]);
    assert.notEqual(launched.code, 0);
    assert.deepEqual(launched.leftovers, []);
    assert.match(
      launched.stderr,
      /\[rank 0\] train: \S+ddp\.safetensors: is a file, a --strategy ddp snapshot/,
    );
    assert.ok(readSaved(ddpSnapshot), "the snapshot is untouched");
  });
});

Deno.test("--strategy fsdp keeps its snapshot in a folder of its own unless --snapshot says where", () => {
  const snapshotOf = (...args: string[]) => {
    const config = parseTrainArgs(args);
    assert.ok(config !== "help");
    return [config.strategy, config.snapshot];
  };
  assert.deepEqual(snapshotOf(), ["ddp", resolve("runs/default/snapshot.safetensors")]);
  assert.deepEqual(snapshotOf("--strategy", "fsdp"), ["fsdp", resolve("runs/fsdp/snapshot")]);
  assert.deepEqual(snapshotOf("--strategy", "fsdp", "--model", "gpt"), [
    "fsdp",
    resolve("runs/gpt-fsdp/snapshot"),
  ]);
  // A path given is the user's, from the folder they ran the job in.
  assert.deepEqual(snapshotOf("--strategy", "fsdp", "--snapshot", "x"), ["fsdp", resolve("x")]);
});
