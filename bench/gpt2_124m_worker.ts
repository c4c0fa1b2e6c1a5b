/**
 * One rank (or the one process) of the GPT-2 124M benchmark (issue 39): dtrain's `nn.GPT` at
 * GPT-2 124M's shape (or any given), f32, AdamW, random tokens; `--strategy` `single` (one
 * process, `--threads` BLAS threads), `ddp` or `fsdp` (`parallel.fullyShard` on each block, then
 * the root), over Gloo. Its twin is bench/gpt2_124m_torch.py; bench/gpt2_124m.ts runs both.
 * Every rank prints one `BENCH_RESULT` line with its own peak RSS, so the driver can report the
 * largest; the step time counts `warmup` untimed steps out.
 * @module
 */

import { parseArgs } from "node:util";
import { barrier, destroyProcessGroup, initProcessGroup } from "../src/distributed/mod.ts";
import { AdamW } from "../src/optim/adamw.ts";
import { DistributedDataParallel, fullyShard } from "../src/parallel/mod.ts";
import { tensor } from "../src/tensor/creation.ts";
import { tidyAsync } from "../src/tensor/scope.ts";
import { peakAllocatedBytes } from "../src/tensor/storage.ts";
import { setNumThreads } from "../src/tensor/threads.ts";
import type { Tensor } from "../src/tensor/tensor.ts";
import { benchGPT, peakRssBytes, report } from "./workload.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: Object.fromEntries(
    [
      "strategy",
      "vocab",
      "block",
      "n-layer",
      "n-head",
      "n-embd",
      "batch",
      "steps",
      "warmup",
      "threads",
    ]
      .map((name) => [name, { type: "string" as const }]),
  ),
});
const int = (name: string) => Number(values[name]);
const [V, T, B] = [int("vocab"), int("block"), int("batch")];
const strategy = values.strategy ?? "single";

setNumThreads(int("threads") || 1);
const group = strategy === "single" ? undefined : await initProcessGroup({ backend: "gloo" });
const rank = group?.rank ?? 0;
const world = group?.size ?? 1;
const gpt = benchGPT(int);
let forward: (x: Tensor, y: Tensor) => Tensor;
let backward: (loss: Tensor) => Promise<void>;
if (strategy === "fsdp") {
  for (const block of gpt.transformer.h.children()) fullyShard(block);
  const model = fullyShard(gpt);
  forward = (x, y) => model.forward(x, y).loss;
  backward = (loss) => model.backward(loss);
} else if (strategy === "ddp") {
  const ddp = await DistributedDataParallel.create(gpt);
  forward = (x, y) => ddp.forward(x, y).loss!;
  backward = (loss) => ddp.backward(loss);
} else {
  forward = (x, y) => gpt.forward(x, y).loss!;
  backward = (loss) => Promise.resolve(loss.backward());
}
// nanoGPT's train.py: lr 6e-4, betas (0.9, 0.95), weight decay 0.1.
const optimizer = new AdamW(gpt.parameters(), { lr: 6e-4, betas: [0.9, 0.95], weightDecay: 0.1 });
let seed = 1 + rank;
const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;

const stepMs: number[] = [];
// Forward, backward (with its communication) and optimizer milliseconds of each timed step: the
// coarse profile BENCHMARKS.md explains the ratios with.
const phaseMs: number[][] = [];
let lastLoss = 0;
const steps = int("steps"), warmup = int("warmup");
for (let step = 0; step < warmup + steps; step++) {
  const tokens = Int32Array.from({ length: B * (T + 1) }, () => Math.floor(random() * V));
  const start = performance.now();
  let phase: number[] = [];
  lastLoss = await tidyAsync(async () => {
    const x = tensor(tokens.filter((_, i) => i % (T + 1) !== T), [B, T], { dtype: "i32" });
    const y = tensor(tokens.filter((_, i) => i % (T + 1) !== 0), [B, T], { dtype: "i32" });
    const loss = forward(x, y);
    const value = loss.item();
    const forwardEnd = performance.now();
    await backward(loss);
    const backwardEnd = performance.now();
    optimizer.step();
    optimizer.zeroGrad();
    phase = [forwardEnd - start, backwardEnd - forwardEnd, performance.now() - backwardEnd];
    return value;
  });
  if (step >= warmup) {
    stepMs.push(performance.now() - start);
    phaseMs.push(phase);
  }
}
if (group) await barrier();
const seconds = stepMs.reduce((a, b) => a + b, 0) / 1000;
report({
  framework: "dtrain",
  strategy,
  rank,
  worldSize: world,
  tokensPerSecond: (steps * B * T * world) / seconds,
  stepMs,
  phaseMs,
  // The high-water mark of native tensor memory, against which peak RSS shows the rest.
  peakTensorBytes: peakAllocatedBytes(),
  peakRssBytes: peakRssBytes(),
  loss: lastLoss,
});
if (group) await destroyProcessGroup();
