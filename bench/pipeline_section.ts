/**
 * The pipeline section of `make bench` (bench/main.ts, `--only=pipeline`): GPT training split
 * into stages by `parallel.splitGPT`, run by ScheduleGPipe, Schedule1F1B and
 * ScheduleInterleaved1F1B, dtrain (bench/pipeline_worker.ts, over shared memory and over Gloo)
 * against `torch.distributed.pipelining` 2.13 (bench/pipeline_torch.py, Gloo) on the same split,
 * in the same run, alternately, one thread per rank: 4 ranks (4 stages; Interleaved1F1B 8 stages,
 * 2 per rank) and 2 ranks (2 stages; Interleaved1F1B 4), 8 microbatches each.
 * The GPT: 8 blocks of width 128, 4 heads, block 64, byte vocabulary; a batch of 16 sequences
 * (microbatches of 2). Reported: each schedule's measured bubble (1 − busy / step, the mean over
 * ranks; busy is the time inside forward and backward actions) against its theoretical value,
 * tokens/s, and per-rank memory (the allocator's bytes at the model state and at the largest
 * sample before a backward, and peak RSS).
 * @module
 */

import { alternate, median, num, type Options, pct, ranks, ratio, table } from "./bench_lib.ts";
import type { Runs } from "./bench_lib.ts";
import { denoWorker, pythonWorker, type RunResult } from "./runner.ts";

/** The model, the batch and the microbatches, both sides (and bench/pipeline_trace.ts). */
export const MODEL_ARGS = [
  "--vocab=256",
  "--block=64",
  "--n-layer=8",
  "--n-head=4",
  "--n-embd=128",
  "--batch=16",
  "--microbatches=8",
];
/** 1 warm-up step, 3 timed. */
const ARGS = [...MODEL_ARGS, "--steps=3", "--warmup=1"];
const M = 8;
const KINDS = [
  { schedule: "gpipe", label: "GPipe", perRank: 1 },
  { schedule: "1f1b", label: "1F1B", perRank: 1 },
  { schedule: "interleaved", label: "Interleaved1F1B", perRank: 2 },
] as const;
const WORLDS = [4, 2];

/**
 * The theoretical bubble of p ranks, v stages per rank and m microbatches when forward and
 * backward take the same time everywhere and messages are free: (p − 1) / (v·m + p − 1)
 * (GPipe and 1F1B: v = 1; Interleaved1F1B: Narayanan et al. 2021, "Efficient Large-Scale
 * Language Model Training on GPU Clusters", §2.2, whose (p − 1) / (v·m) is relative to the ideal
 * step, here a share of the whole step).
 */
export function theoreticalBubble(p: number, v: number, m: number): number {
  return (p - 1) / (v * m + p - 1);
}

function sides(schedule: string, world: number, python: string | null) {
  const args = [`--schedule=${schedule}`, ...ARGS];
  const what = `pipeline ${schedule} ${world}`;
  return {
    dtrain: ranks(what, world, () => denoWorker("pipeline_worker.ts", args), { DTRAIN_SHM: "1" }),
    gloo: ranks(what, world, () => denoWorker("pipeline_worker.ts", args), { DTRAIN_SHM: "0" }),
    torch: python
      ? ranks(what, world, (rank, port) =>
        pythonWorker(python, "pipeline_torch.py", [
          ...args,
          `--rank=${rank}`,
          `--world-size=${world}`,
          `--port=${port}`,
        ]))
      : undefined,
  };
}

/** A field by its dtrain name, or the PyTorch side's snake_case name. */
function value(r: Record<string, unknown>, name: string): unknown {
  return r[name] ?? r[name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)];
}
const scalar = (runs: RunResult[], name: string) =>
  median(runs.map((r) => value(r.result, name) as number));
/** The median over runs of each rank's entry of a per-rank field. */
const perRank = (runs: RunResult[], name: string): number[] => {
  const all = runs.map((r) => value(r.result, name) as number[]).filter(Array.isArray);
  return (all[0] ?? []).map((_, k) => median(all.map((a) => a[k])));
};
const mib = (x: number) => num(x / 2 ** 20, 1);
const list = (v: number[], f: (x: number) => string) => v.map(f).join(" / ");

/** The section: each schedule at 4 and 2 ranks, dtrain shm / Gloo / PyTorch alternately. */
export async function benchPipeline(options: Options, python: string | null) {
  console.log(
    "\n(h) pipeline parallelism: GPT 8x128, block 64, 16 sequences in 8 microbatches, AdamW, " +
      "1 thread per rank; dtrain over shared memory and Gloo, PyTorch over Gloo (4 ranks " +
      "oversubscribe 2 cores)",
  );
  const headline = (r: Record<string, unknown>) =>
    `${num(value(r, "tokensPerSecond") as number)} tokens/s, bubble ${
      pct(value(r, "bubble") as number)
    }`;
  const runs: Record<string, Runs> = {};
  for (const world of WORLDS) {
    for (const { schedule, label } of KINDS) {
      runs[`${schedule} ${world}`] = await alternate(
        `${label} on ${world} ranks`,
        options.rounds,
        sides(schedule, world, python),
        headline,
      );
    }
  }
  const rows = (world: number) =>
    KINDS.map(({ schedule, label, perRank: v }) => ({
      label: `${label}, ${world} ranks × ${v} = ${world * v} stages`,
      runs: runs[`${schedule} ${world}`],
      theory: theoreticalBubble(world, v, M),
    }));
  const all = WORLDS.flatMap(rows);
  const bubble = all.map(({ label, runs: r, theory }) => [
    label,
    pct(theory),
    pct(scalar(r.dtrain, "bubble")),
    pct(scalar(r.gloo, "bubble")),
    pct(scalar(r.torch, "bubble")),
    list(perRank(r.dtrain, "bubblePerRank"), pct),
    list(perRank(r.torch, "bubblePerRank"), pct),
  ]);
  console.log(`\n${
    table([
      "(h) bubble, m = 8",
      "theory",
      "dtrain shm",
      "dtrain Gloo",
      "PyTorch",
      "dtrain shm by rank",
      "PyTorch by rank",
    ], bubble)
  }`);
  const tps = "tokensPerSecond";
  const speed = all.map(({ label, runs: r }) => [
    label,
    num(scalar(r.dtrain, tps)),
    num(scalar(r.gloo, tps)),
    num(scalar(r.torch, tps)),
    ratio(scalar(r.dtrain, tps) / scalar(r.torch, tps)),
    ratio(scalar(r.gloo, tps) / scalar(r.torch, tps)),
  ]);
  console.log(
    `\n${
      table(
        ["(h) tokens/s", "dtrain shm", "dtrain Gloo", "PyTorch", "shm/PyTorch", "Gloo/PyTorch"],
        [
          ...speed,
        ],
      )
    }`,
  );
  const memory = all.flatMap(({ label, runs: r }) =>
    (["peakBytesPerRank", "modelBytesPerRank", "peakRssBytesPerRank"] as const).map((name) => {
      const d = perRank(r.dtrain, name), t = perRank(r.torch, name);
      const what = { peakBytesPerRank: "step peak", modelBytesPerRank: "model state" }[
        name as string
      ] ?? "peak RSS";
      return [
        `${label}, ${what}`,
        list(d, mib),
        list(t, mib),
        list(d.map((x, k) => x / t[k]), (x) => x.toFixed(2)),
      ];
    })
  );
  console.log(
    `\n${table(["(h) memory by rank, MiB", "dtrain", "PyTorch", "dtrain/PyTorch"], memory)}`,
  );
  return runs;
}
