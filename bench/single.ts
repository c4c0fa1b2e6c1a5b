/**
 * dtrain's single-process worker of `make bench`: one epoch of Fashion-MNIST on the benchmark MLP
 * (`--mode=train`), or the machine's sgemm peak through `matmul` (`--mode=peak`). Prints one
 * `BENCH_RESULT` line.
 *
 * Usage: deno run -A --v8-flags=--expose-gc bench/single.ts --mode=train --threads=2
 * @module
 */

import { DataLoader, FashionMNIST } from "../src/data/mod.ts";
import { MLP } from "../src/nn/container.ts";
import { crossEntropy } from "../src/tensor/ops/cross_entropy.ts";
import { matmul } from "../src/tensor/ops/matmul.ts";
import { SGD } from "../src/optim/sgd.ts";
import { noGrad } from "../src/tensor/autograd.ts";
import { randn } from "../src/tensor/creation.ts";
import { manualSeed } from "../src/tensor/random.ts";
import { setNumThreads } from "../src/tensor/threads.ts";
import { tidy } from "../src/tensor/scope.ts";
import {
  argValue,
  BATCH,
  flopsPerStep,
  LR,
  MOMENTUM,
  NORMALIZE,
  PEAK_N,
  PEAK_REPS,
  peakRssBytes,
  report,
  SEED,
  sinceSpawnMs,
  SIZES,
} from "./workload.ts";

/** One epoch, timed from the first batch to the last step; the first step also from spawn. */
function train(): Record<string, unknown> {
  manualSeed(SEED);
  const dataset = new FashionMNIST({ normalize: NORMALIZE });
  const model = new MLP([...SIZES]);
  const optimizer = new SGD(model.parameters(), { lr: LR, momentum: MOMENTUM });
  const loader = new DataLoader(dataset, { batchSize: BATCH, shuffle: true, seed: SEED });
  loader.setEpoch(0);
  let steps = 0, samples = 0, lossSum = 0, lastLosses = 0, firstStepMs: number | null = null;
  const start = performance.now();
  for (const [x, y] of loader) {
    const loss = tidy(() => {
      const l = crossEntropy(model.forward(x), y);
      l.backward();
      optimizer.step();
      optimizer.zeroGrad();
      return l.item();
    });
    if (steps === 0) firstStepMs = sinceSpawnMs();
    samples += x.shape[0];
    x.dispose();
    y.dispose();
    lossSum += loss;
    if (++steps > loader.length - 100) lastLosses += loss;
  }
  const seconds = (performance.now() - start) / 1000;
  return {
    samples,
    steps,
    seconds,
    samplesPerSecond: samples / seconds,
    gflops: (flopsPerStep(BATCH) * steps) / seconds / 1e9,
    firstStepMs,
    peakRssBytes: peakRssBytes(),
    meanLoss: lossSum / steps,
    lastLoss: lastLosses / Math.min(100, steps),
  };
}

/** The best of PEAK_REPS products of PEAK_N³, in GFLOP/s. */
function peak(): Record<string, unknown> {
  return noGrad(() =>
    tidy(() => {
      const a = randn([PEAK_N, PEAK_N]), b = randn([PEAK_N, PEAK_N]);
      matmul(a, b).dispose();
      let best = Infinity;
      for (let i = 0; i < PEAK_REPS; i++) {
        const t0 = performance.now();
        matmul(a, b).dispose();
        best = Math.min(best, (performance.now() - t0) / 1000);
      }
      return { n: PEAK_N, seconds: best, gflops: (2 * PEAK_N ** 3) / best / 1e9 };
    })
  );
}

if (import.meta.main) {
  const threads = Number(argValue(Deno.args, "threads", "2"));
  setNumThreads(threads);
  const mode = argValue(Deno.args, "mode", "train");
  if (mode !== "train" && mode !== "peak") throw new Error(`single.ts: unknown --mode=${mode}`);
  report({ framework: "dtrain", mode, threads, ...(mode === "train" ? train() : peak()) });
}
