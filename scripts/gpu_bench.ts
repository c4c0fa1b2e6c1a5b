/**
 * The GPU benchmark's dtrain side (scripts/gpu_check.sh runs it): GPT-2 small (124M parameters,
 * block 1024) training steps on cuda:0 with bf16 products and f32 master weights, AdamW; prints
 * one JSON line with tokens/s and MFU. scripts/gpu_bench_torch.py is the same run in PyTorch.
 * Options: --batch N (default 8), --steps N (default 10, after 2 warm-up steps).
 * @module
 */

import { parseArgs } from "node:util";
import { cuda, manualSeed, nn, optim, tensor } from "../mod.ts";

const { values } = parseArgs({
  options: { batch: { type: "string", default: "8" }, steps: { type: "string", default: "10" } },
});
const batch = Number(values.batch), steps = Number(values.steps);
const config = { vocabSize: 50304, blockSize: 1024, nLayer: 12, nHead: 12, nEmbd: 768 };

function report(fields: Record<string, unknown>): void {
  console.log(JSON.stringify({ framework: "dtrain", ...fields }));
}

if (!cuda.isAvailable()) {
  report({ skipped: `CUDA is not available: ${cuda.unavailableReason()}` });
} else {
  manualSeed(0);
  cuda.setMatmulPrecision("medium");
  const model = new nn.GPT(config).to("cuda");
  const opt = new optim.AdamW(model.parameters(), { lr: 6e-4, weightDecay: 0.1 });
  const T = config.blockSize;
  let seed = 1;
  const tokens = (shape: number[]) => {
    const ids = new Int32Array(batch * T);
    for (let i = 0; i < ids.length; i++) {
      seed = (seed * 1103515245 + 12345) >>> 0;
      ids[i] = seed % config.vocabSize;
    }
    return tensor(ids, shape, { dtype: "i32", device: "cuda" });
  };
  const step = () => {
    const x = tokens([batch, T]), y = tokens([batch, T]);
    // nanoGPT's forward with targets: the logits [B, T, V] and their cross-entropy.
    const { logits, loss } = model.forward(x, y);
    loss.backward();
    opt.step();
    opt.zeroGrad();
    const value = loss.item(); // waits for the step's kernels
    for (const t of [x, y, logits, loss]) t.dispose();
    return value;
  };
  for (let i = 0; i < 2; i++) step();
  const start = performance.now();
  let loss = 0;
  for (let i = 0; i < steps; i++) loss = step();
  cuda.synchronize();
  const seconds = (performance.now() - start) / 1000;
  const params = model.numParameters();
  const tokensPerSecond = (batch * T * steps) / seconds;
  // nanoGPT's estimate_mfu: 6N + 12 L H Q T flops per token, against the GPU's dense bf16 peak.
  const flopsPerToken = 6 * params +
    12 * config.nLayer * config.nHead * (config.nEmbd / config.nHead) * T;
  const name = cuda.getDeviceName(0);
  const peak = /H100|H200|GH200/.test(name) ? 989e12 : /A100/.test(name) ? 312e12 : null;
  report({
    device: name,
    params,
    batch,
    block: T,
    steps,
    loss,
    tokensPerSecond: Math.round(tokensPerSecond),
    mfu: peak === null ? null : (flopsPerToken * tokensPerSecond) / peak,
  });
}
