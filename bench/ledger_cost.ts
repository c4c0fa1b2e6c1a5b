/**
 * The flight recorder's cost (src/distributed/ledger.ts): DDP and FSDP step time with the ledger off
 * (DTRAIN_LEDGER=0) and on (the default, 2000 entries), in the same run, alternating blocks of
 * steps so that both see the same machine. Rank 0 prints, per strategy, the collectives per step,
 * the median wall and CPU (its own process) time per step of each setting and the medians of the
 * per-round ratios on/off. The workloads: DDP on the benchmark
 * MLP (bench/workload.ts, batch 64; `ddp`), DDP on a small GPT (`ddp-gpt`) and FSDP on the same GPT
 * (each block sharded, then the root; `fsdp`), one BLAS thread per rank.
 *
 *     deno task launch --nproc-per-node 2 bench/ledger_cost.ts [--rounds 10] [--steps 20] [--only ddp|ddp-gpt|fsdp] [--size N]
 * @module
 */

import process from "node:process";
import { parseArgs } from "node:util";
import { barrier, destroyProcessGroup, initProcessGroup } from "../src/distributed/mod.ts";
import { callerScope, ledgerEntries, setLedgerSize } from "../src/distributed/ledger.ts";
import { track } from "../src/distributed/track.ts";
import { GPT } from "../src/nn/gpt.ts";
import { MLP } from "../src/nn/container.ts";
import { AdamW } from "../src/optim/adamw.ts";
import { SGD } from "../src/optim/sgd.ts";
import { DistributedDataParallel, fullyShard } from "../src/parallel/mod.ts";
import { randn, tensor } from "../src/tensor/creation.ts";
import type { Tensor } from "../src/tensor/tensor.ts";
import { crossEntropy } from "../src/tensor/ops/cross_entropy.ts";
import { manualSeed } from "../src/tensor/random.ts";
import { tidyAsync } from "../src/tensor/scope.ts";
import { setNumThreads } from "../src/tensor/threads.ts";
import { BATCH, SIZES } from "./workload.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: {
    rounds: { type: "string" },
    steps: { type: "string" },
    only: { type: "string" },
    size: { type: "string" },
  },
});
const ROUNDS = Number(values.rounds ?? 10), STEPS = Number(values.steps ?? 20);
/** The ledger's length when on (default DTRAIN_LEDGER's default). */
const LEDGER = Number(values.size ?? 2000);

setNumThreads(1);
const group = await initProcessGroup({ backend: "gloo" });
manualSeed(0);

/** A DDP step on the MLP. */
async function ddpStep(): Promise<() => Promise<void>> {
  const ddp = await DistributedDataParallel.create(new MLP([...SIZES]));
  const optimizer = new SGD(ddp.parameters(), { lr: 0.01 });
  const x = randn([BATCH, SIZES[0]]);
  const y = tensor(Int32Array.from({ length: BATCH }, (_, i) => i % 10), [BATCH]);
  return () =>
    tidyAsync(async () => {
      await ddp.backward(crossEntropy(ddp.forward(x), y));
      optimizer.step();
      optimizer.zeroGrad();
    });
}

/** The small GPT both GPT workloads train, and a batch of its tokens. */
function smallGPT(): { gpt: GPT; x: () => Tensor; y: () => Tensor } {
  const [V, T, B] = [256, 64, 4];
  const gpt = new GPT({ vocabSize: V, blockSize: T, nLayer: 4, nHead: 4, nEmbd: 128 });
  const tokens = Int32Array.from({ length: B * T }, (_, i) => (i * 7 + group.rank) % V);
  return {
    gpt,
    x: () => tensor(tokens, [B, T]),
    y: () => tensor(tokens.map((t) => (t + 1) % V), [B, T]),
  };
}

/** A DDP step on the small GPT. */
async function ddpGPTStep(): Promise<() => Promise<void>> {
  const { gpt, x, y } = smallGPT();
  const ddp = await DistributedDataParallel.create(gpt);
  const optimizer = new AdamW(gpt.parameters(), { lr: 1e-3 });
  return () =>
    tidyAsync(async () => {
      await ddp.backward(ddp.forward(x(), y()).loss!);
      optimizer.step();
      optimizer.zeroGrad();
    });
}

/** An FSDP step on the small GPT. */
function fsdpStep(): () => Promise<void> {
  const { gpt, x, y } = smallGPT();
  for (const block of gpt.transformer.h.children()) fullyShard(block);
  const model = fullyShard(gpt);
  const optimizer = new AdamW(gpt.parameters(), { lr: 1e-3 });
  return () =>
    tidyAsync(async () => {
      await model.backward(model.forward(x(), y()).loss);
      optimizer.step();
      optimizer.zeroGrad();
    });
}

/**
 * Microseconds the hook every collective calls (src/distributed/track.ts: enqueue, start, end) costs
 * with the ledger at `size`, called from a stack `depth` frames below this one (inside one
 * callerScope when `scoped`).
 */
function hookUs(size: number, depth: number, scoped = false): number {
  setLedgerSize(size);
  const n = 20000;
  const run = (d: number): number => {
    if (d > 0) return run(d - 1);
    if (scoped) return callerScope(() => timed());
    return timed();
  };
  const timed = () => {
    const start = performance.now();
    for (let i = 0; i < n; i++) {
      const t = track({ group: "bench", op: "allReduce", dtype: "f32", shape: [n], bytes: 4 * n });
      t.start();
      t.end();
    }
    return ((performance.now() - start) * 1000) / n;
  };
  return run(depth);
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];

/** Wall and CPU (this process's) milliseconds per step of `STEPS` steps, the ledger at `size`. */
async function block(step: () => Promise<void>, size: number): Promise<[number, number]> {
  setLedgerSize(size);
  await barrier();
  const cpu0 = process.cpuUsage();
  const start = performance.now();
  for (let i = 0; i < STEPS; i++) await step();
  const wall = (performance.now() - start) / STEPS;
  const cpu1 = process.cpuUsage();
  await barrier();
  return [wall, (cpu1.user + cpu1.system - cpu0.user - cpu0.system) / 1000 / STEPS];
}

if (group.rank === 0) {
  const hook = (depth: number) => ({
    depth,
    offUs: median([0, 1, 2].map(() => hookUs(0, depth))),
    onUs: median([0, 1, 2].map(() => hookUs(LEDGER, depth))),
    // Inside callerScope (DDP's and FSDP's backward, FSDP's forward): no capture per call.
    scopedUs: median([0, 1, 2].map(() => hookUs(LEDGER, depth, true))),
  });
  console.log(
    `BENCH_RESULT ${JSON.stringify({ bench: "ledger_hook", runs: [hook(5), hook(40)] })}`,
  );
}

for (
  const [name, make] of [["ddp", ddpStep], ["ddp-gpt", ddpGPTStep], ["fsdp", fsdpStep]] as const
) {
  if (values.only !== undefined && values.only !== name) continue;
  const step = await make();
  for (let i = 0; i < 5; i++) await step();
  setLedgerSize(LEDGER);
  const before = performance.timeOrigin * 1000 + performance.now() * 1000;
  await step();
  const collectives = ledgerEntries().filter((e) => e.enqueuedUs >= before).length;
  const rows: { off: number[]; on: number[]; ratio: number[] }[] = [0, 1].map(() => ({
    off: [],
    on: [],
    ratio: [],
  }));
  for (let r = 0; r < ROUNDS; r++) {
    // Which goes first alternates, so that a drift of the machine falls on both.
    const first = r % 2 === 0 ? 0 : LEDGER;
    const a = await block(step, first), b = await block(step, LEDGER - first);
    const [off, on] = first === 0 ? [a, b] : [b, a];
    rows.forEach((row, i) => {
      row.off.push(off[i]);
      row.on.push(on[i]);
      row.ratio.push(on[i] / off[i]);
    });
  }
  if (group.rank === 0) {
    const [wall, cpu] = rows;
    console.log(
      `BENCH_RESULT ${
        JSON.stringify({
          bench: "ledger_cost",
          strategy: name,
          worldSize: group.size,
          rounds: ROUNDS,
          stepsPerBlock: STEPS,
          collectivesPerStep: collectives,
          offMs: median(wall.off),
          onMs: median(wall.on),
          onOverOff: median(wall.ratio),
          cpuOffMs: median(cpu.off),
          cpuOnMs: median(cpu.on),
          cpuOnOverOff: median(cpu.ratio),
        })
      }`,
    );
  }
}
setLedgerSize(LEDGER);
await destroyProcessGroup();
