// run: deno task launch --nproc-per-node 2 docs/guide/examples/07_ladder.ts
// expect-match: \[rank 0\] per-parameter all-reduce +[0-9.]+ ms/step
// expect-match: \[rank 0\] one flat all-reduce +[0-9.]+ ms/step
// expect-match: \[rank 0\] DDP \(buckets, overlapped\) +[0-9.]+ ms/step
// expect: [rank 1] all three end with the same weights
// timeout: 60
import assert from "node:assert/strict";
import { parseArgs } from "node:util";
import {
  cat,
  dist,
  manualSeed,
  nn,
  optim,
  parallel,
  randint,
  type Tensor,
  tidyAsync,
} from "../../../mod.ts";

const args = parseArgs({
  args: Deno.args,
  options: {
    "n-layer": { type: "string", default: "2" },
    "n-embd": { type: "string", default: "64" },
    steps: { type: "string", default: "8" },
  },
}).values;
const config = {
  vocabSize: 64,
  blockSize: 32,
  nLayer: Number(args["n-layer"]),
  nHead: 4,
  nEmbd: Number(args["n-embd"]),
};
const B = 8, steps = Number(args.steps), warmup = 2;

await dist.initProcessGroup({ backend: "gloo" });
const rank = dist.getRank(), n = dist.getWorldSize();

/** Averages every gradient with one all-reduce per parameter, awaited in turn, after backward. */
async function perParameter(params: Tensor[]) {
  for (const p of params) {
    await dist.allReduce(p.grad!);
    p.grad!.div_(n);
  }
}

/** Averages every gradient with one all-reduce of all of them laid end to end. */
async function flat(params: Tensor[]) {
  const all = cat(params.map((p) => p.grad!.reshape([-1])));
  await dist.allReduce(all);
  let at = 0;
  for (const p of params) {
    p.grad!.copy_(all.narrow(0, at, p.numel()).reshape(p.shape).div(n));
    at += p.numel();
  }
}

/** Trains `steps` steps after `warmup` and returns the median milliseconds per step. */
async function run(variant: "perParameter" | "flat" | "ddp") {
  manualSeed(0);
  const gpt = new nn.GPT(config);
  const params = gpt.parameters();
  const ddp = variant === "ddp" ? await parallel.DistributedDataParallel.create(gpt) : null;
  const opt = new optim.AdamW(params, { lr: 1e-3 });
  const times: number[] = [];
  for (let step = 0; step < warmup + steps; step++) {
    manualSeed(1000 * step + rank); // each rank its own batch, the same in every variant
    const idx = randint(64, [B, config.blockSize + 1]);
    await dist.barrier();
    const start = performance.now();
    await tidyAsync(async () => {
      const x = idx.narrow(1, 0, config.blockSize), y = idx.narrow(1, 1, config.blockSize);
      if (ddp) {
        await ddp.backward(ddp.forward(x, y).loss!);
      } else {
        gpt.forward(x, y).loss!.backward();
        await (variant === "flat" ? flat(params) : perParameter(params));
      }
      opt.step();
      opt.zeroGrad();
    });
    if (step >= warmup) times.push(performance.now() - start);
    idx.dispose();
  }
  times.sort((a, b) => a - b);
  return { variant, ms: times[Math.floor(times.length / 2)], weights: params[0].toArray() };
}

const results = [await run("perParameter"), await run("flat"), await run("ddp")];
const names = {
  perParameter: "per-parameter all-reduce",
  flat: "one flat all-reduce",
  ddp: "DDP (buckets, overlapped)",
};
if (rank === 0) {
  for (const r of results) console.log(`${names[r.variant].padEnd(26)} ${r.ms.toFixed(2)} ms/step`);
  console.log(JSON.stringify({
    backend: dist.worldGroup().backendName,
    config,
    results: results.map(({ variant, ms }) => ({ variant, ms })),
  }));
}
// The same arithmetic in another order: the same weights, up to float rounding.
for (const r of results.slice(1)) {
  r.weights.forEach((w, i) =>
    assert.ok(Math.abs(w - results[0].weights[i]) < 1e-5, `${r.variant} differs`)
  );
}
console.log("all three end with the same weights");
await dist.destroyProcessGroup();
