/**
 * dtrain's DDP worker of `make bench`: one rank of a data-parallel epoch of Fashion-MNIST on the
 * benchmark MLP (batch 64 per rank, one BLAS thread). The parent starts every rank with the
 * env:// variables (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, DTRAIN_TOKEN); rank 0 prints the
 * `BENCH_RESULT` line with the job's throughput and how much all-reduce time backward hid.
 * @module
 */

import { DataLoader, DistributedSampler, FashionMNIST } from "../src/data/mod.ts";
import { barrier, destroyProcessGroup, initProcessGroup } from "../src/distributed/mod.ts";
import { MLP } from "../src/nn/container.ts";
import { SGD } from "../src/optim/sgd.ts";
import { DistributedDataParallel } from "../src/parallel/ddp.ts";
import { crossEntropy } from "../src/tensor/ops/cross_entropy.ts";
import { manualSeed } from "../src/tensor/random.ts";
import { setNumThreads } from "../src/tensor/threads.ts";
import { tidyAsync } from "../src/tensor/scope.ts";
import { BATCH, LR, MOMENTUM, NORMALIZE, report, SEED, SIZES } from "./workload.ts";

setNumThreads(1);
const group = await initProcessGroup({ backend: "gloo" });
manualSeed(SEED);
const dataset = new FashionMNIST({ normalize: NORMALIZE });
const ddp = await DistributedDataParallel.create(new MLP([...SIZES]));
const optimizer = new SGD(ddp.parameters(), { lr: LR, momentum: MOMENTUM });
const sampler = new DistributedSampler(dataset, { shuffle: true, seed: SEED });
const loader = new DataLoader(dataset, { batchSize: BATCH, sampler });
loader.setEpoch(0);

let steps = 0, lossSum = 0, backwardMs = 0, exposedMs = 0, spanMs = 0, buckets = 0;
await barrier();
const start = performance.now();
for (const [x, y] of loader) {
  lossSum += await tidyAsync(async () => {
    const loss = crossEntropy(ddp.forward(x), y);
    await ddp.backward(loss);
    optimizer.step();
    optimizer.zeroGrad();
    return loss.item();
  });
  x.dispose();
  y.dispose();
  const stats = ddp.lastStats;
  backwardMs += stats.backwardMs;
  exposedMs += stats.exposedCommMs;
  spanMs += stats.commSpanMs;
  buckets = stats.buckets;
  steps++;
}
await barrier();
const seconds = (performance.now() - start) / 1000;
const samples = sampler.totalSize;
if (group.rank === 0) {
  report({
    framework: "dtrain",
    worldSize: group.size,
    samples,
    steps,
    seconds,
    samplesPerSecond: samples / seconds,
    stepMs: seconds * 1000 / steps,
    meanLoss: lossSum / steps,
    backwardMs: backwardMs / steps,
    exposedCommMs: exposedMs / steps,
    commSpanMs: spanMs / steps,
    hiddenFraction: spanMs > 0 ? 1 - exposedMs / spanMs : null,
    buckets,
  });
}
await destroyProcessGroup();
