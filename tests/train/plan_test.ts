/**
 * The train job's planner (src/train/plan*.ts): its memory prediction against the allocator's
 * measured peak on the job's own Trainer, `--dry-run` (prints, starts nothing), the refusal of a
 * plan that does not fit (DTRAIN_MEM_AVAILABLE makes the memory small) and `--batch-size auto`.
 * @module
 */

import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { parseTrainArgs, type TrainConfig } from "../../src/train/config.ts";
import { planSync, resolveAutoBatch, unfitReason } from "../../src/train/plan.ts";
import { planMemory } from "../../src/train/plan_memory.ts";
import { cpuModel, type MachineNumbers } from "../../src/train/plan_machine.ts";
import { ROOT, runDeno } from "../_harness/processes.ts";
import { smallCorpus, train } from "./_train.ts";
import { writeCharData } from "./_tokens.ts";

/** The allocator's peak of a fresh process that trains `flags` for 3 steps (bench/plan_worker.ts). */
async function measuredPeak(flags: string[]): Promise<number> {
  const run = await runDeno({ timeoutMs: 30_000, args: [`${ROOT}bench/plan_worker.ts`, ...flags] });
  assert.equal(run.code, 0, run.stderr);
  return JSON.parse(run.stdout.match(/PLAN_MEASURED (\{.*\})/)![1]).peakBytes;
}

const SMALL_GPT = ["--model", "gpt", "--nproc-per-node", "1", "--threads", "1"];

/** A config of the train job's flags, its snapshot in `dir` (never written). */
function configOf(flags: string[], dir: string): TrainConfig {
  return parseTrainArgs([...flags, "--snapshot", join(dir, "snap")]) as TrainConfig;
}

Deno.test("plan: a small GPT's predicted peak is the allocator's measured peak within 5%", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const root = await smallCorpus(dir);
    for (
      const shape of [
        ["--n-layer", "2", "--n-embd", "64", "--block-size", "64", "--batch-size", "4"],
        [
          "--n-layer",
          "3",
          "--n-embd",
          "128",
          "--block-size",
          "32",
          "--batch-size",
          "8",
          "--ac",
          "full",
        ],
      ]
    ) {
      const flags = [...SMALL_GPT, ...shape, "--data-root", root, "--snapshot", join(dir, "s")];
      const predicted = planMemory(configOf(flags, dir)).peak;
      const measured = await measuredPeak(flags);
      const error = predicted / measured - 1;
      assert.ok(
        Math.abs(error) <= 0.05,
        `${shape.join(" ")}: predicted ${predicted}, measured ${measured} (${
          (error * 100).toFixed(1)
        }%)`,
      );
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("plan: FSDP's predicted peak per rank is the larger measured peak of 2 real ranks within 5%", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const root = await smallCorpus(dir);
    const flags = [
      ...SMALL_GPT,
      ...["--nproc-per-node", "2", "--strategy", "fsdp", "--n-layer", "2", "--n-embd", "64"],
      ...["--block-size", "64", "--batch-size", "4", "--data-root", root],
      ...["--snapshot", join(dir, "fsdp")],
    ];
    const predicted = planMemory(configOf(flags, dir)).peak;
    const run = await runDeno({
      timeoutMs: 30_000,
      args: [
        `${ROOT}src/launch/main.ts`,
        ...["--nproc-per-node", "2", "--standalone", `${ROOT}bench/plan_worker.ts`, ...flags],
      ],
      env: { DTRAIN_TOKEN: "plan-test" },
    });
    assert.equal(run.code, 0, run.stderr);
    const peaks = [...run.stdout.matchAll(/PLAN_MEASURED (\{.*\})/g)]
      .map((m) => JSON.parse(m[1]).peakBytes as number);
    assert.equal(peaks.length, 2, run.stdout);
    const measured = Math.max(...peaks), error = predicted / measured - 1;
    assert.ok(
      Math.abs(error) <= 0.05,
      `predicted ${predicted}, measured ${peaks} (${(error * 100).toFixed(1)}%)`,
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

/** A cache of machine numbers for this CPU at 1 thread, so that a dry run measures nothing. */
async function machineCache(dir: string): Promise<string> {
  const numbers: MachineNumbers = {
    matmulFlops: { 64: 2e10, 128: 4e10, 256: 5e10, 512: 5e10 },
    bf16MatmulFlops: 2e10,
    opSeconds: 2e-5,
    copyBytesPerSecond: 1e10,
    allReduce: { bytesPerSecond: 2e9, latencySeconds: 1e-4 },
    baselineRssBytes: 80 * 2 ** 20,
  };
  const path = join(dir, "machine.json");
  await Deno.writeTextFile(path, JSON.stringify({ [`v2 ${cpuModel()} × 1 threads`]: numbers }));
  return path;
}

Deno.test("plan: --dry-run prints the plan per rank and starts no worker", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const snapshot = join(dir, "run", "snap.safetensors");
    const run = await train(
      [...SMALL_GPT, "--nproc-per-node", "2", "--snapshot", snapshot, "--dry-run"],
      { timeoutMs: 30_000, env: { DTRAIN_MACHINE_CACHE: await machineCache(dir) } },
    );
    assert.equal(run.code, 0, run.stderr);
    assert.match(run.stdout, /peak tensor memory per rank: [\d.]+ MiB/);
    assert.match(run.stdout, /peak RSS per rank: [\d.]+ MiB/);
    assert.match(run.stdout, /step time per rank: [\d.]+ ms/);
    assert.match(run.stdout, /world size 2 \(2 on this node\)/);
    // No launcher, no rank: nothing prefixed by a rank, no log folder beside the snapshot.
    assert.doesNotMatch(run.stdout + run.stderr, /\[rank \d\]/);
    assert.ok(!existsSync(join(dir, "run")), "the dry run made the run's folder");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("plan: a plan that does not fit is refused before any process, naming both sizes", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const flags = [...SMALL_GPT, "--nproc-per-node", "2", "--snapshot", join(dir, "s")];
    const plan = planSync(configOf(flags, dir));
    const available = Math.floor(plan.rssBytes * 2 * 0.9); // 10% short for 2 ranks
    const run = await train(flags, {
      timeoutMs: 30_000,
      env: { DTRAIN_MEM_AVAILABLE: String(available) },
    });
    assert.equal(run.code, 2, run.stdout + run.stderr);
    assert.match(run.stderr, /needs [\d.]+ MiB per rank .* × 2 rank\(s\) on this node/);
    assert.match(run.stderr, /but [\d.]+ MiB is available/);
    assert.doesNotMatch(run.stdout + run.stderr, /\[rank \d\]/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("plan: --batch-size auto picks the largest micro-batch that fits", async () => {
  const dir = await Deno.makeTempDir();
  const before = Deno.env.get("DTRAIN_MEM_AVAILABLE");
  try {
    const flags = [...SMALL_GPT, "--nproc-per-node", "2", "--snapshot", join(dir, "s")];
    const need = (b: number) => planSync(configOf([...flags, "--batch-size", String(b)], dir));
    // Room for 2 ranks of micro-batch 5, not of 6.
    const available = Math.floor(need(5).rssBytes + need(6).rssBytes); // 2 × the midpoint
    Deno.env.set("DTRAIN_MEM_AVAILABLE", String(available));
    assert.equal(unfitReason(need(5), available), null);
    assert.notEqual(unfitReason(need(6), available), null);
    const notes: string[] = [];
    const args = resolveAutoBatch([...flags, "--batch-size", "auto"], notes);
    assert.equal((parseTrainArgs(args) as TrainConfig).batchSize, 5);
    assert.match(notes[0], /--batch-size auto: micro-batch 5/);
    // Nothing fits: refused, naming the numbers.
    Deno.env.set("DTRAIN_MEM_AVAILABLE", String(2 ** 20));
    assert.throws(
      () => resolveAutoBatch([...flags, "--batch-size=auto"]),
      /not even a micro-batch of 1 fits: the plan needs/,
    );
  } finally {
    if (before === undefined) Deno.env.delete("DTRAIN_MEM_AVAILABLE");
    else Deno.env.set("DTRAIN_MEM_AVAILABLE", before);
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("plan: --batch-size auto on a token job divides its batch and keeps the global batch", async () => {
  const dir = await Deno.makeTempDir();
  const before = Deno.env.get("DTRAIN_MEM_AVAILABLE");
  try {
    const data = join(dir, "data");
    await writeCharData(data);
    // nanoGPT's micro-batch 12, 2 micro-steps per iteration on one process: a global batch of 24.
    const flags = [
      ...["--dataset", "tokens", "--data-dir", data, "--out-dir", join(dir, "out")],
      ...["--gradient-accumulation-steps", "2", "--threads", "1"],
    ];
    const need = (b: number) => planSync(configOf([...flags, "--batch-size", String(b)], dir));
    // Room for micro-batch 5, not 6: the largest divisor of 12 that fits is 4.
    const available = Math.floor((need(5).rssBytes + need(6).rssBytes) / 2);
    Deno.env.set("DTRAIN_MEM_AVAILABLE", String(available));
    const notes: string[] = [];
    const config = parseTrainArgs(resolveAutoBatch([...flags, "--batch-size", "auto"], notes));
    assert.equal((config as TrainConfig).batchSize, 4);
    assert.equal((config as TrainConfig).gradientAccumulationSteps, 6);
    assert.match(notes[0], /micro-batch 4, --gradient-accumulation-steps 6 \(global batch 24/);
  } finally {
    if (before === undefined) Deno.env.delete("DTRAIN_MEM_AVAILABLE");
    else Deno.env.set("DTRAIN_MEM_AVAILABLE", before);
    await Deno.remove(dir, { recursive: true });
  }
});
