/**
 * The flight recorder's cost (src/dist/ledger.ts): DDP and FSDP step time with the ledger off
 * (DTRAIN_LEDGER=0) and on (the default, 2000 entries), in the same run, alternating blocks of
 * steps so that both see the same machine. Rank 0 prints, per strategy, the median step time of
 * each setting and the median of the per-round ratios on/off. The workloads: DDP on the benchmark
 * MLP (bench/workload.ts, batch 64), FSDP on a small GPT (each block sharded, then the root), one
 * BLAS thread per rank.
 *
 *     deno task launch --nproc-per-node 2 bench/ledger_cost.ts [--rounds 10] [--steps 20]
 * @module
 */

import { parseArgs } from "node:util";
import { barrier, destroyProcessGroup, initProcessGroup } from "../src/dist/mod.ts";
import { setLedgerSize } from "../src/dist/ledger.ts";
import { GPT } from "../src/nn/gpt.ts";
import { MLP } from "../src/nn/container.ts";
import { AdamW } from "../src/optim/adamw.ts";
import { SGD } from "../src/optim/sgd.ts";
import { DistributedDataParallel, fullyShard } from "../src/parallel/mod.ts";
import { randn, tensor } from "../src/tensor/creation.ts";
import { crossEntropy } from "../src/tensor/ops/cross_entropy.ts";
import { manualSeed } from "../src/tensor/random.ts";
import { tidyAsync } from "../src/tensor/scope.ts";
import { setNumThreads } from "../src/tensor/threads.ts";
import { BATCH, SIZES } from "./workload.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: { rounds: { type: "string" }, steps: { type: "string" } },
});
const ROUNDS = Number(values.rounds ?? 10), STEPS = Number(values.steps ?? 20);
const LEDGER = 2000;

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

/** An FSDP step on a small GPT. */
function fsdpStep(): () => Promise<void> {
  const [V, T, B] = [256, 64, 4];
  const gpt = new GPT({ vocabSize: V, blockSize: T, nLayer: 4, nHead: 4, nEmbd: 128 });
  for (const block of gpt.transformer.h.children()) fullyShard(block);
  const model = fullyShard(gpt);
  const optimizer = new AdamW(gpt.parameters(), { lr: 1e-3 });
  const tokens = Int32Array.from({ length: B * T }, (_, i) => (i * 7 + group.rank) % V);
  return () =>
    tidyAsync(async () => {
      const x = tensor(tokens, [B, T]);
      const y = tensor(tokens.map((t) => (t + 1) % V), [B, T]);
      await model.backward(model.forward(x, y).loss);
      optimizer.step();
      optimizer.zeroGrad();
    });
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1];

/** Milliseconds per step of `STEPS` steps with the ledger at `size`. */
async function block(step: () => Promise<void>, size: number): Promise<number> {
  setLedgerSize(size);
  await barrier();
  const start = performance.now();
  for (let i = 0; i < STEPS; i++) await step();
  await barrier();
  return (performance.now() - start) / STEPS;
}

for (const [name, make] of [["ddp", ddpStep], ["fsdp", fsdpStep]] as const) {
  const step = await make();
  for (let i = 0; i < 5; i++) await step();
  const off: number[] = [], on: number[] = [], ratio: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    // Which goes first alternates, so that a drift of the machine falls on both.
    const first = r % 2 === 0 ? 0 : LEDGER;
    const a = await block(step, first), b = await block(step, LEDGER - first);
    const [o, n] = first === 0 ? [a, b] : [b, a];
    off.push(o);
    on.push(n);
    ratio.push(n / o);
  }
  if (group.rank === 0) {
    console.log(
      `BENCH_RESULT ${
        JSON.stringify({
          bench: "ledger_cost",
          strategy: name,
          worldSize: group.size,
          rounds: ROUNDS,
          stepsPerBlock: STEPS,
          offMs: median(off),
          onMs: median(on),
          onOverOff: median(ratio),
        })
      }`,
    );
  }
}
setLedgerSize(LEDGER);
await destroyProcessGroup();
