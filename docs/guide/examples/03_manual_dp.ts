// run: deno task launch --nproc-per-node 2 docs/guide/examples/03_manual_dp.ts
// expect: [rank 0] 8 steps of 2 ranks × 16 samples: loss
// expect: [rank 1] the same parameters as rank 0: true
// expect: [rank 0] the same parameters as one process training on batches of 32: true
import assert from "node:assert/strict";
import {
  data,
  dist,
  F,
  manualSeed,
  nn,
  optim,
  profile,
  type Tensor,
  tensor,
} from "../../../mod.ts";

/** Sizes, small by default; `--width 512 --layers 6 --steps 12` for a trace worth looking at. */
export function sizes(args = Deno.args) {
  const flag = (name: string, fallback: number) => {
    const i = args.indexOf(`--${name}`);
    return i >= 0 ? Number(args[i + 1]) : fallback;
  };
  const width = flag("width", 32), hidden = Array(flag("layers", 2)).fill(width);
  return { width, steps: flag("steps", 8), batch: flag("batch", 16), mlp: [width, ...hidden, 1] };
}

/** One data-parallel step: local forward and backward, then one all-reduce per gradient. */
export async function manualStep(model: nn.Module, opt: optim.SGD, x: Tensor, y: Tensor) {
  const loss = profile.span("forward", "compute", () => F.mseLoss(model.forward(x), y));
  profile.span("backward", "compute", () => loss.backward());
  const start = performance.now();
  for (const p of model.parameters()) await dist.allReduce(p.grad!, "avg"); // mean over ranks
  const exposedMs = performance.now() - start; // nothing else runs meanwhile: all of it exposed
  profile.span("optimizer step", "optim", () => opt.step());
  opt.zeroGrad();
  return { loss: loss.item(), exposedMs };
}

if (import.meta.main) {
  await dist.initProcessGroup({ backend: "gloo" });
  const { width, steps, batch, mlp } = sizes(), n = dist.getWorldSize();
  const train = new data.SyntheticRegression({ size: steps * batch * n, inputs: width });
  const newModel = () => (manualSeed(0), new nn.MLP(mlp));
  const model = newModel();
  for (const p of model.parameters()) await dist.broadcast(p, 0); // start from rank 0's weights
  const opt = new optim.SGD(model.parameters(), { lr: 0.1 });
  // Each rank draws its own share: every n-th sample of one shuffled order.
  const sampler = new data.DistributedSampler(train, { seed: 1 });
  const losses = [], exposed = [];
  for (const [x, y] of new data.DataLoader(train, { batchSize: batch, sampler })) {
    const { loss, exposedMs } = await manualStep(model, opt, x, y);
    losses.push(loss), exposed.push(exposedMs);
  }
  const mean = (a: number[]) => a.reduce((s, v) => s + v, 0) / a.length;
  console.log(
    `${steps} steps of ${n} ranks × ${batch} samples: loss ${losses[0].toFixed(4)} → ` +
      `${losses.at(-1)!.toFixed(4)}; exposed communication ${mean(exposed).toFixed(2)} ms a step`,
  );
  if (Deno.args.includes("--no-check")) Deno.exit(0); // a run for its trace only
  // Every rank holds bit for bit the same parameters: rank 0's, broadcast, equal ours.
  const flat = (m: nn.Module) => Float32Array.from(m.parameters().flatMap((p) => [...p.toArray()]));
  const ours = flat(model), theirs = tensor(ours);
  await dist.broadcast(theirs, 0);
  const same = theirs.toArray().every((v, i) => v === ours[i]);
  console.log(`the same parameters as rank 0: ${same}`);
  assert.ok(same);
  // And as one process taking the union of the ranks' batches each step (to rounding).
  const single = newModel(), singleOpt = new optim.SGD(single.parameters(), { lr: 0.1 });
  const shares = Array.from({ length: n }, (_, r) => [
    ...new data.DistributedSampler(train, { numReplicas: n, rank: r, seed: 1 }),
  ]);
  for (let s = 0; s < steps; s++) {
    const indices = shares.flatMap((share) => share.slice(s * batch, (s + 1) * batch));
    const [x, y] = train.getBatch(Int32Array.from(indices));
    F.mseLoss(single.forward(x), y).backward();
    singleOpt.step(), singleOpt.zeroGrad();
  }
  const diff = Math.max(...flat(single).map((v, i) => Math.abs(v - ours[i])));
  console.log(
    `the same parameters as one process training on batches of ${n * batch}: ${diff < 1e-5}`,
  );
  assert.ok(diff < 1e-5, `max difference ${diff}`);
  await dist.destroyProcessGroup();
}
