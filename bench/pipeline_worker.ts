/**
 * dtrain's worker of the pipeline section of `make bench` (bench/pipeline_section.ts): one rank of
 * GPT training (AdamW, one BLAS thread, random tokens) with `parallel.splitGPT` stages run by
 * `--schedule` (gpipe, 1f1b: a stage per rank; interleaved: 2 stages per rank, rank r holding
 * stages r and r + world, as PyTorch's looped placement). The transport is the job's: shared
 * memory on one host, Gloo with DTRAIN_SHM=0. Its twin is bench/pipeline_torch.py.
 *
 * The bubble is measured as the PyTorch side measures it: each stage's `forwardOne` and
 * `backwardOne` are timed (the spans `F3 s1` and `B3 s1` of the trace), and a rank's bubble is
 * 1 − busy / step, the share of the step it spends receiving from its neighbours or idle.
 *
 * Memory: one untimed step after the warm-up samples `allocatedBytes()` after collections before
 * the step (the model state: parameters, AdamW moments) and before each backward (the model state
 * plus the activations of the microbatches in flight); the largest is `peakBytes`.
 * Rank 0 prints one `BENCH_RESULT` line with every rank's numbers gathered.
 * @module
 */

import { parseArgs } from "node:util";
import {
  allGather,
  barrier,
  destroyProcessGroup,
  getRank,
  getWorldSize,
  initProcessGroup,
} from "../src/distributed/mod.ts";
import { span } from "../src/profile/tracer.ts";
import { AdamW } from "../src/optim/adamw.ts";
import * as parallel from "../src/parallel/mod.ts";
import { tensor, zeros } from "../src/tensor/creation.ts";
import { crossEntropy } from "../src/tensor/ops/cross_entropy.ts";
import { allocatedBytes } from "../src/tensor/storage.ts";
import type { Tensor } from "../src/tensor/tensor.ts";
import { setNumThreads } from "../src/tensor/threads.ts";
import { benchGPT, peakRssBytes, report } from "./workload.ts";

const NUMBERS = [
  "vocab",
  "block",
  "n-layer",
  "n-head",
  "n-embd",
  "batch",
  "microbatches",
  "steps",
  "warmup",
];
const { values } = parseArgs({
  args: Deno.args,
  options: Object.fromEntries(
    ["schedule", ...NUMBERS].map((name) => [name, { type: "string" as const }]),
  ),
});
const int = (name: string) => {
  const n = Number(values[name]);
  if (!Number.isInteger(n) || n < 0) {
    throw new Error(`bench/pipeline_worker.ts: --${name}=${values[name]}`);
  }
  return n;
};
const kind = values.schedule ?? "";
if (!["gpipe", "1f1b", "interleaved"].includes(kind)) {
  throw new Error(`bench/pipeline_worker.ts: --schedule=${kind} (gpipe, 1f1b or interleaved)`);
}
const [V, T, B, M] = [int("vocab"), int("block"), int("batch"), int("microbatches")];
const gc = (globalThis as { gc?: () => void }).gc;
if (gc === undefined) throw new Error("bench/pipeline_worker.ts: run with --v8-flags=--expose-gc");

setNumThreads(1);
await initProcessGroup();
const world = getWorldSize(), rank = getRank();
const perRank = kind === "interleaved" ? 2 : 1, numStages = world * perRank;
/** This rank's stages, split from the whole model (which is then dropped, as PyTorch's side). */
function split() {
  const model = benchGPT(int);
  return indices.map((s) => parallel.splitGPT(model, s, numStages));
}
const indices = Array.from({ length: perRank }, (_, k) => rank + k * world);
const modules = split();
const stages = modules.map((m, k) => new parallel.PipelineStage(m, indices[k], numStages));
const holdsFirst = indices.includes(0), holdsLast = indices.includes(numStages - 1);

/** Milliseconds inside forward and backward actions this step. */
let busyMs = 0;
/** Set during the memory step: called (and awaited) before each backward. */
let beforeBackward: (() => Promise<void>) | null = null;
for (const stage of stages) {
  const forwardOne = stage.forwardOne.bind(stage), backwardOne = stage.backwardOne.bind(stage);
  stage.forwardOne = (mb, input, loss) => {
    const start = performance.now();
    try {
      return forwardOne(mb, input, loss);
    } finally {
      busyMs += performance.now() - start;
    }
  };
  stage.backwardOne = async (mb, gradOutput) => {
    if (beforeBackward) await beforeBackward();
    const start = performance.now();
    try {
      return await backwardOne(mb, gradOutput);
    } finally {
      busyMs += performance.now() - start;
    }
  };
}

const loss = (logits: Tensor, target: Tensor) =>
  crossEntropy(logits.reshape([-1, V]), target.reshape([-1]));
const schedule = kind === "gpipe"
  ? new parallel.ScheduleGPipe(stages[0], M, loss)
  : kind === "1f1b"
  ? new parallel.Schedule1F1B(stages[0], M, loss)
  : new parallel.ScheduleInterleaved1F1B(stages, M, loss);
// Each parameter once: with one stage per rank and world 1 the tied embedding is on both ends.
const params = [...new Set(modules.flatMap((m) => m.parameters()))];
const optimizer = new AdamW(params, { lr: 1e-3 });

// Every rank draws the same tokens; stage 0 reads the input, the last stage the targets.
let seed = 1;
const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;

/** One event-loop turn: finalizers of collected tensors run on one (src/tensor/storage.ts). */
const turn = () => new Promise((resolve) => setTimeout(resolve, 0));
/** `allocatedBytes()` once the tensors already dropped are collected. */
async function settledBytes(): Promise<number> {
  for (let i = 0; i < 2; i++) {
    gc!();
    await turn();
  }
  return allocatedBytes();
}

async function step(): Promise<void> {
  const tokens = Int32Array.from({ length: B * (T + 1) }, () => Math.floor(random() * V));
  const x = tensor(tokens.filter((_, i) => i % (T + 1) !== T), [B, T], { dtype: "i32" });
  const y = tensor(tokens.filter((_, i) => i % (T + 1) !== 0), [B, T], { dtype: "i32" });
  optimizer.zeroGrad();
  const out = await schedule.step(holdsFirst ? x : undefined, holdsLast ? { target: y } : {});
  out?.dispose();
  span("optimizer step", "optim", () => optimizer.step());
  x.dispose();
  y.dispose();
}

for (let i = 0; i < int("warmup"); i++) await step();
const modelBytes = await settledBytes();
let peakBytes = modelBytes;
beforeBackward = async () => {
  peakBytes = Math.max(peakBytes, await settledBytes());
};
await step();
beforeBackward = null;

const times: number[] = [], busy: number[] = [];
for (let i = 0; i < int("steps"); i++) {
  await barrier();
  busyMs = 0;
  const start = performance.now();
  await step();
  times.push(performance.now() - start);
  busy.push(busyMs);
}
const middle = (v: number[]) => [...v].sort((a, b) => a - b)[v.length >> 1];
const stepMs = middle(times);
// Each rank's median bubble and memory, gathered on rank 0 (MiB, so that f32 holds them).
const mine = [
  1 - middle(busy.map((b, i) => b / times[i])),
  modelBytes / 2 ** 20,
  peakBytes / 2 ** 20,
  (peakRssBytes() ?? NaN) / 2 ** 20,
];
const every = Array.from({ length: world }, () => zeros([mine.length]));
await allGather(every, tensor(Float32Array.from(mine), [mine.length])).wait();
const column = (k: number, scale = 1) => every.map((t) => t.toArray()[k] * scale);
if (rank === 0) {
  const bubbles = column(0);
  report({
    framework: "dtrain",
    schedule: kind,
    stages: numStages,
    microbatches: M,
    stepMs,
    tokensPerSecond: (B * T) / (stepMs / 1000),
    bubblePerRank: bubbles,
    bubble: bubbles.reduce((a, b) => a + b, 0) / bubbles.length,
    modelBytesPerRank: column(1, 2 ** 20),
    peakBytesPerRank: column(2, 2 ** 20),
    peakRssBytesPerRank: column(3, 2 ** 20),
  });
}
await destroyProcessGroup();
