// run: deno task launch --nproc-per-node 2 docs/guide/examples/07_roofline.ts
// expect-match: \[rank 0\] compute: [0-9.]+ GFLOP/s \(matmul 256\), memory: [0-9.]+ GB/s \(add\), ridge at [0-9.]+ flop/byte
// expect-match: \[rank 0\] communication: [0-9.]+ GB/s bus bandwidth \(all-reduce of 4 MiB over shm\)
// expect-match: \[rank 0\] GPT step: compute bound [0-9.]+ ms, communication bound [0-9.]+ ms, measured [0-9.]+ ms
// timeout: 60
import assert from "node:assert/strict";
import {
  dist,
  matmul,
  nn,
  optim,
  parallel,
  randint,
  randn,
  tidyAsync,
  zeros,
} from "../../../mod.ts";

await dist.initProcessGroup({ backend: "gloo" }); // the launcher gave each rank 1 BLAS thread
const rank = dist.getRank(), n = dist.getWorldSize();

/** The best of `trials` timings of `fn`, in seconds (the least disturbed by other processes). */
async function best(trials: number, fn: () => void | Promise<void>): Promise<number> {
  await fn(); // warm-up: the first call pays for allocation and page faults
  let t = Infinity;
  for (let i = 0; i < trials; i++) {
    await dist.barrier(); // both ranks measure at once, as they compete in a real step
    const start = performance.now();
    await fn();
    t = Math.min(t, (performance.now() - start) / 1000);
  }
  return t;
}

// The compute roof: a square matmul does 2·m³ flops on 3·m² numbers, far more flops than bytes.
const m = 256, a = randn([m, m]), b = randn([m, m]);
const gflops = (2 * m ** 3) / await best(5, () => matmul(a, b).dispose()) / 1e9;
// The memory roof: an add reads two numbers and writes one per flop: 12 bytes per flop.
const big = 1 << 22, x = randn([big]), y = randn([big]);
const gbs = (3 * 4 * big) / await best(5, () => x.add(y).dispose()) / 1e9;
// The communication roof: a ring all-reduce moves 2(n-1)/n of the bytes through each rank.
const mib = 4, buf = zeros([(mib << 20) / 4]);
const busbw = (2 * (n - 1) / n) * (mib << 20) / await best(5, async () => {
  await dist.allReduce(buf);
}) / 1e9;

// A small GPT step under DDP, and its two bounds.
const config = { vocabSize: 64, blockSize: 32, nLayer: 2, nHead: 4, nEmbd: 64 };
const gpt = new nn.GPT(config), B = 8;
const psi = gpt.parameters().reduce((s, p) => s + p.numel(), 0);
const ddp = await parallel.DistributedDataParallel.create(gpt);
const opt = new optim.AdamW(ddp.parameters(), { lr: 1e-3 });
const idx = randint(64, [B, config.blockSize + 1]);
const input = idx.narrow(1, 0, config.blockSize), target = idx.narrow(1, 1, config.blockSize);
const stepSeconds = await best(5, () =>
  tidyAsync(async () => {
    const loss = ddp.forward(input, target).loss!; // nanoGPT's forward(idx, targets)
    await ddp.backward(loss);
    opt.step();
    opt.zeroGrad();
  }));
// nanoGPT's count (estimateMfu): 6·Ψ + 12·L·C·T flops per token, forward and backward.
const flops = (6 * psi + 12 * config.nLayer * config.nEmbd * config.blockSize) * B *
  config.blockSize;
const computeMs = 1000 * flops / (gflops * 1e9);
const commMs = 1000 * (2 * (n - 1) / n) * 4 * psi / (busbw * 1e9);
assert.ok(stepSeconds * 1000 > computeMs * 0.5, "a step cannot beat its compute roof by 2x");

if (rank === 0) {
  console.log(
    `compute: ${gflops.toFixed(1)} GFLOP/s (matmul ${m}), memory: ${gbs.toFixed(2)} GB/s (add), ` +
      `ridge at ${(gflops / gbs).toFixed(1)} flop/byte`,
  );
  console.log(
    `communication: ${busbw.toFixed(2)} GB/s bus bandwidth (all-reduce of ${mib} MiB over ` +
      `${dist.worldGroup().backendName})`,
  );
  console.log(
    `GPT step: compute bound ${computeMs.toFixed(2)} ms, communication bound ${
      commMs.toFixed(2)
    } ms, ` +
      `measured ${(stepSeconds * 1000).toFixed(2)} ms (${psi} parameters, ${
        B * config.blockSize
      } tokens per rank)`,
  );
  console.log(
    JSON.stringify({ gflops, gbs, busbw, psi, computeMs, commMs, stepMs: stepSeconds * 1000 }),
  );
}
await dist.destroyProcessGroup();
