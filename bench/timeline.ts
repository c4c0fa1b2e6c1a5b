/**
 * The README's timeline: a few DDP steps of a 4-layer MLP on 2 ranks, with buckets small enough
 * that backward fills several, recorded with DTRAIN_PROFILE and drawn by src/profile/svg.ts.
 *
 *     DTRAIN_PROFILE=runs/timeline.json deno run -A src/launch/main.ts --nproc-per-node 2 bench/timeline.ts
 *     deno run -A src/profile/svg.ts runs/timeline.json runs/timeline.svg --last-steps=2
 * @module
 */

import { destroyProcessGroup, initProcessGroup } from "../src/distributed/mod.ts";
import { MLP } from "../src/nn/container.ts";
import { SGD } from "../src/optim/sgd.ts";
import { DistributedDataParallel } from "../src/parallel/ddp.ts";
import { nowUs, record, span } from "../src/profile/tracer.ts";
import { randn } from "../src/tensor/creation.ts";
import { crossEntropy } from "../src/tensor/ops/cross_entropy.ts";
import { manualSeed } from "../src/tensor/random.ts";
import { tidyAsync } from "../src/tensor/scope.ts";
import { setNumThreads } from "../src/tensor/threads.ts";
import { tensor } from "../src/tensor/creation.ts";

setNumThreads(1);
await initProcessGroup();
manualSeed(0);
const ddp = await DistributedDataParallel.create(new MLP([784, 1024, 1024, 1024, 10]), {
  firstBucketMb: 1,
  bucketCapMb: 2,
});
const optimizer = new SGD(ddp.parameters(), { lr: 0.01 });
for (let step = 0; step < 12; step++) {
  await tidyAsync(async () => {
    const fetched = nowUs();
    const x = randn([64, 784]);
    const y = tensor(Int32Array.from({ length: 64 }, (_, i) => (i * 7 + step) % 10), [64]);
    record("data", "data", fetched, nowUs());
    const loss = span("forward", "compute", () => crossEntropy(ddp.forward(x), y));
    await ddp.backward(loss);
    span("optimizer step", "optim", () => optimizer.step());
    optimizer.zeroGrad();
  });
}
await destroyProcessGroup();
