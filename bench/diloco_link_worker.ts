/**
 * One replica of bench/diloco_link.ts, on one host of the throttled link: nanoGPT's Shakespeare
 * character model (scaled down, see the flags) trained for `--steps` steps of `--batch` windows of
 * `--block` characters, either with DDP (every step's gradients averaged over the link) or with
 * DiLoCo (`--mode=diloco`, `--h` inner steps between averages of the pseudo-gradients). Both
 * modes read the same windows on the same rank, so the two runs spend the same token budget on
 * the same data. Prints one JSON line: the validation loss of the final weights on fixed windows
 * of the last 10% of the text, the training loop's wall time, the bytes the collectives sent,
 * and the training loss of the last steps.
 *
 * Env: RANK (0 or 1), MASTER (rank 0's address; it hosts the store on port 29500), DTRAIN_TOKEN.
 * Usage: deno run -A bench/diloco_link_worker.ts --mode=ddp|diloco --data=input.txt [--steps=500]
 *   [--h=50] [--batch=12] [--block=64] [--layers=4] [--heads=4] [--width=128] [--lr=1e-3]
 * @module
 */

import {
  dist,
  manualSeed,
  nn,
  noGrad,
  optim,
  parallel,
  setNumThreads,
  tensor,
  tidy,
  tidyAsync,
} from "../mod.ts";
import { argValue } from "./workload.ts";

const flag = (name: string, fallback: string) => argValue(Deno.args, name, fallback);
const mode = flag("mode", "ddp");
const steps = Number(flag("steps", "500"));
const syncEvery = Number(flag("h", "50"));
const batch = Number(flag("batch", "12"));
const block = Number(flag("block", "64"));
const lr = Number(flag("lr", "1e-3"));
/** Validation windows (each `batch` × `block`), the same for both modes. */
const EVAL_BATCHES = 20;

if (mode !== "ddp" && mode !== "diloco") throw new Error(`diloco_link_worker: --mode=${mode}`);
// Two replicas share the machine's cores: one thread each.
setNumThreads(1);

const text = await Deno.readTextFile(flag("data", ""));
const chars = [...new Set(text)].sort();
const ids = new Map(chars.map((c, i) => [c, i]));
const encoded = Int32Array.from(text, (c) => ids.get(c)!);
// nanoGPT's prepare.py: the first 90% trains, the rest validates.
const cut = Math.floor(encoded.length * 0.9);
const [train, val] = [encoded.subarray(0, cut), encoded.subarray(cut)];

/** A deterministic generator of window starts (an LCG), seeded per rank and purpose. */
function starts(seed: number, count: number, limit: number): number[] {
  let s = seed >>> 0;
  return Array.from({ length: count }, () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s % limit;
  });
}

/** Inputs and next-character targets [batch, block] from windows of `data` at `at`. */
function windows(data: Int32Array, at: number[]) {
  const x = new Int32Array(at.length * block);
  const y = new Int32Array(at.length * block);
  at.forEach((start, row) => {
    x.set(data.subarray(start, start + block), row * block);
    y.set(data.subarray(start + 1, start + block + 1), row * block);
  });
  return {
    x: tensor(x, [at.length, block], { dtype: "i32" }),
    y: tensor(y, [at.length, block], { dtype: "i32" }),
  };
}

const rank = Number(Deno.env.get("RANK"));
await dist.initProcessGroup({
  backend: "gloo",
  initMethod: `tcp://${Deno.env.get("MASTER")}:29500`,
  rank,
  worldSize: 2,
  timeoutMs: 120_000,
});
manualSeed(1337);
const model = new nn.GPT({
  vocabSize: chars.length,
  blockSize: block,
  nLayer: Number(flag("layers", "4")),
  nHead: Number(flag("heads", "4")),
  nEmbd: Number(flag("width", "128")),
  dropout: 0,
});
// nanoGPT's Shakespeare settings: AdamW, β₂ = 0.99 (a small dataset), weight decay 0.1.
const innerOptimizer = () =>
  new optim.AdamW(model.parameters(), { lr, betas: [0.9, 0.99], weightDecay: 0.1 });

const trainStarts = starts(1000 + rank, steps * batch, train.length - block - 1);
const lossOf = (m: nn.GPT, at: number[], data: Int32Array) => {
  const { x, y } = windows(data, at);
  return m.forward(x, y).loss!;
};
const lastLosses: number[] = [];
let bytes = 0;
let start: number;
if (mode === "ddp") {
  const ddp = await parallel.DistributedDataParallel.create(model);
  const opt = innerOptimizer();
  start = performance.now();
  for (let step = 0; step < steps; step++) {
    await tidyAsync(async () => {
      const loss = lossOf(ddp.module, trainStarts.slice(step * batch, (step + 1) * batch), train);
      await ddp.backward(loss);
      opt.step();
      opt.zeroGrad();
      if (step >= steps - 10) lastLosses.push(loss.item());
    });
    bytes += ddp.lastStats.allReduceBytes;
  }
} else {
  const inner = innerOptimizer();
  const diloco = await parallel.DiLoCo.create(model, inner, { syncEvery });
  start = performance.now();
  for (let step = 0; step < steps; step++) {
    inner.zeroGrad();
    const loss = tidy(() => {
      const l = lossOf(model, trainStarts.slice(step * batch, (step + 1) * batch), train);
      l.backward();
      return l.item();
    });
    if (step >= steps - 10) lastLosses.push(loss);
    if (await diloco.step()) bytes += diloco.lastSync!.bytes;
  }
  diloco.dispose();
}
const wallSeconds = (performance.now() - start) / 1000;
const evalStarts = starts(7, EVAL_BATCHES * batch, val.length - block - 1);
const valLoss = noGrad(() => {
  let sum = 0;
  for (let i = 0; i < EVAL_BATCHES; i++) {
    sum += tidy(() => lossOf(model, evalStarts.slice(i * batch, (i + 1) * batch), val).item());
  }
  return sum / EVAL_BATCHES;
});
await dist.destroyProcessGroup();
const trainLoss = lastLosses.reduce((a, b) => a + b, 0) / lastLosses.length;
console.log(JSON.stringify({ mode, rank, steps, valLoss, trainLoss, wallSeconds, bytes }));
