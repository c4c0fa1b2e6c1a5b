/**
 * A short DDP loop for paired comparisons of backends and settings: 20 warm-up and 150 timed
 * steps of the benchmark MLP (784-512-512-10, batch 64, one BLAS thread) on random data; rank 0
 * prints wall and CPU milliseconds per step, backward and exposed all-reduce wait.
 *
 *     deno task launch --nproc-per-node 2 bench/ddp_steps.ts                 # shared memory
 *     DTRAIN_SHM_QUEUE=0 deno task launch --nproc-per-node 2 bench/ddp_steps.ts  # queue off
 *     DTRAIN_SHM=0 deno task launch --nproc-per-node 2 bench/ddp_steps.ts    # Gloo
 * @module
 */

import process from "node:process";
import { barrier, destroyProcessGroup, initProcessGroup } from "../src/distributed/mod.ts";
import { MLP } from "../src/nn/container.ts";
import { SGD } from "../src/optim/sgd.ts";
import { DistributedDataParallel } from "../src/parallel/ddp.ts";
import { randn, tensor } from "../src/tensor/creation.ts";
import { crossEntropy } from "../src/tensor/ops/cross_entropy.ts";
import { tidyAsync } from "../src/tensor/scope.ts";
import { setNumThreads } from "../src/tensor/threads.ts";
import { SIZES } from "./workload.ts";

const STEPS = 150;
setNumThreads(1);
const group = await initProcessGroup();
const ddp = await DistributedDataParallel.create(new MLP([...SIZES]));
const optimizer = new SGD(ddp.parameters(), { lr: 0.01 });
const x = randn([64, SIZES[0]]);
const y = tensor(Int32Array.from({ length: 64 }, (_, i) => i % 10), [64]);
let backwardMs = 0, exposedMs = 0;
const step = async () => {
  await tidyAsync(async () => {
    await ddp.backward(crossEntropy(ddp.forward(x), y));
    optimizer.step();
    optimizer.zeroGrad();
  });
  backwardMs += ddp.lastStats.backwardMs;
  exposedMs += ddp.lastStats.exposedCommMs;
};
for (let i = 0; i < 20; i++) await step();
backwardMs = exposedMs = 0;
await barrier();
const cpu0 = process.cpuUsage();
const start = performance.now();
for (let i = 0; i < STEPS; i++) await step();
const cpu1 = process.cpuUsage();
if (group.rank === 0) {
  const per = (ms: number) => (ms / STEPS).toFixed(2);
  const cpuMs = (cpu1.user + cpu1.system - cpu0.user - cpu0.system) / 1000;
  console.log(
    `${group.backendName}: ${per(performance.now() - start)} ms/step, cpu ${per(cpuMs)} ms/step, ` +
      `backward ${per(backwardMs)} ms, exposed wait ${per(exposedMs)} ms`,
  );
}
x.dispose();
y.dispose();
await destroyProcessGroup();
