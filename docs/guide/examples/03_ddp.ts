// run: deno task launch --nproc-per-node 2 docs/guide/examples/03_ddp.ts
// expect: [rank 0] DDP == the manual loop: true
// expect: [rank 0] 2 micro-batches under noSync == one batch: true
// expect-match: \[rank 0\] DDP: 1 bucket\(s\), \d+ bytes a step; backward [\d.]+ ms, communication span [\d.]+ ms, exposed [\d.]+ ms
// run: DTRAIN_SHM=0 deno task launch --nproc-per-node 2 docs/guide/examples/03_ddp.ts
// expect: [rank 1] DDP == the manual loop: true
// expect: [rank 1] 2 micro-batches under noSync == one batch: true
import assert from "node:assert/strict";
import { data, dist, F, manualSeed, nn, optim, parallel, profile } from "../../../mod.ts";
import { manualStep, sizes } from "./03_manual_dp.ts";

await dist.initProcessGroup({ backend: "gloo" });
const { width, steps, batch, mlp } = sizes(), n = dist.getWorldSize();
const flag = (name: string) => Deno.args.includes(`--${name}`);
const mb = (name: string, fallback: number) => {
  const i = Deno.args.indexOf(`--${name}`);
  return i >= 0 ? Number(Deno.args[i + 1]) : fallback;
};
const train = new data.SyntheticRegression({ size: steps * batch * n, inputs: width });
const newModel = () => (manualSeed(0), new nn.MLP(mlp));
const sgd = (m: nn.Module) => new optim.SGD(m.parameters(), { lr: 0.1 });
const batches = () =>
  new data.DataLoader(train, { batchSize: batch, sampler: new data.DistributedSampler(train) });

// DDP: gradients land in buckets as backward produces them; a full bucket's all-reduce starts
// at once, while backward computes the earlier layers.
const ddp = await parallel.DistributedDataParallel.create(newModel(), {
  firstBucketMb: mb("first-bucket-mb", 1),
  bucketCapMb: mb("bucket-cap-mb", 25),
});
const opt = sgd(ddp);
const stats: parallel.DDPStats[] = [];
for (const [x, y] of batches()) {
  const loss = profile.span("forward", "compute", () => F.mseLoss(ddp.forward(x), y));
  await ddp.backward(loss); // returns with every bucket reduced: averaged gradients in p.grad
  profile.span("optimizer step", "optim", () => opt.step());
  opt.zeroGrad();
  stats.push(ddp.lastStats);
}
const mean = (f: (s: parallel.DDPStats) => number) =>
  (stats.slice(1).reduce((sum, s) => sum + f(s), 0) / (stats.length - 1)).toFixed(2);
const last = stats.at(-1)!;
console.log(
  `DDP: ${last.buckets} bucket(s), ${last.allReduceBytes} bytes a step; backward ` +
    `${mean((s) => s.backwardMs)} ms, communication span ${mean((s) => s.commSpanMs)} ms, ` +
    `exposed ${mean((s) => s.exposedCommMs)} ms (means over steps 2..${steps})`,
);

const params = (m: nn.Module) => m.parameters().flatMap((p) => [...p.toArray()]);
const maxDiff = (a: number[], b: number[]) => Math.max(...a.map((v, i) => Math.abs(v - b[i])));
if (!flag("no-check")) {
  // The manual loop of 03_manual_dp.ts on the same batches gives the same model.
  const manual = newModel(), manualOpt = sgd(manual);
  for (const [x, y] of batches()) await manualStep(manual, manualOpt, x, y);
  const same = maxDiff(params(manual), params(ddp)) < 1e-6;
  console.log(`DDP == the manual loop: ${same}`);
  assert.ok(same);

  // Gradient accumulation: two half batches, the first under noSync (no communication), each
  // loss halved, sum to the gradient of the whole batch; the second backward reduces the sum.
  const acc = await parallel.DistributedDataParallel.create(newModel());
  const accOpt = sgd(acc);
  for (const [x, y] of batches()) {
    const half = batch / 2;
    await acc.noSync(() =>
      acc.backward(F.mseLoss(acc.forward(x.narrow(0, 0, half)), y.narrow(0, 0, half)).div(2))
    );
    await acc.backward(
      F.mseLoss(acc.forward(x.narrow(0, half, half)), y.narrow(0, half, half)).div(2),
    );
    accOpt.step(), accOpt.zeroGrad();
  }
  const accSame = maxDiff(params(acc), params(ddp)) < 1e-5;
  console.log(`2 micro-batches under noSync == one batch: ${accSame}`);
  assert.ok(accSame);
}
await dist.destroyProcessGroup();
