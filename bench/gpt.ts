/**
 * dtrain's GPT worker of `make bench`: training steps of the benchmark GPT (`--mode=step`: 4
 * layers, 4 heads, width 256, block 128, vocabulary 256, batch 8, AdamW, fp32) or the causal
 * attention forward + backward alone on that model's shape (`--mode=attention`), timed after
 * warm-up steps. Prints one `BENCH_RESULT` line with tokens/s and the peak resident set.
 * `--dtype=bf16` runs the step's forward and loss under `autocast({ deviceType: "cpu", dtype:
 * "bf16" })` and its backward outside, as nanoGPT's `ctx` (bench/gpt_torch.py `--dtype bf16`).
 *
 * Usage: deno run -A --v8-flags=--expose-gc bench/gpt.ts --mode=step --threads=2 [--dtype=bf16]
 * @module
 */

import { autocast, F, manualSeed, nn, optim, randn, setNumThreads, tensor, tidy } from "../mod.ts";
import { argValue, GPT_BENCH, peakRssBytes, report } from "./workload.ts";

const { layers, heads, width, block, vocab, batch, warmup, steps } = GPT_BENCH;

function trainSteps(dtype: string): Record<string, unknown> {
  if (dtype !== "f32" && dtype !== "bf16") throw new Error(`bench/gpt.ts: --dtype=${dtype}`);
  manualSeed(0);
  const model = new nn.GPT({
    vocabSize: vocab,
    blockSize: block,
    nLayer: layers,
    nHead: heads,
    nEmbd: width,
  });
  const opt = new optim.AdamW(model.parameters(), { lr: 1e-3 });
  const tokens = Int32Array.from({ length: batch * (block + 1) }, (_, i) => (i * 7919) % vocab);
  const x = tensor(tokens.filter((_, i) => i % (block + 1) !== block), [batch, block], {
    dtype: "i32",
  });
  const y = tensor(tokens.filter((_, i) => i % (block + 1) !== 0), [batch, block], {
    dtype: "i32",
  });
  const step = () =>
    tidy(() => {
      const { loss } = dtype === "bf16"
        ? autocast({ deviceType: "cpu", dtype: "bf16" }, () => model.forward(x, y))
        : model.forward(x, y);
      loss.backward();
      opt.step();
      opt.zeroGrad();
      return loss.item();
    });
  for (let i = 0; i < warmup; i++) step();
  const start = performance.now();
  let loss = 0;
  for (let i = 0; i < steps; i++) loss = step();
  const seconds = (performance.now() - start) / 1000;
  return {
    tokensPerSecond: (steps * batch * block) / seconds,
    stepMs: (seconds / steps) * 1000,
    loss,
  };
}

function attention(): Record<string, unknown> {
  manualSeed(0);
  const shape = [batch, heads, block, width / heads];
  const [q, k, v] = [0, 1, 2].map(() => randn(shape, { requiresGrad: true }));
  const g = randn(shape);
  const run = () =>
    tidy(() => {
      F.scaledDotProductAttention(q, k, v, { isCausal: true }).backward(g);
      for (const t of [q, k, v]) t.grad = null;
    });
  for (let i = 0; i < warmup; i++) run();
  const reps = steps * 10;
  const start = performance.now();
  for (let i = 0; i < reps; i++) run();
  const ms = (performance.now() - start) / reps;
  return { attentionMs: ms, tokensPerSecond: (batch * block) / (ms / 1000) };
}

const threads = Number(argValue(Deno.args, "threads", "2"));
setNumThreads(threads);
const mode = argValue(Deno.args, "mode", "step");
const dtype = argValue(Deno.args, "dtype", "f32");
const result = mode === "attention" ? attention() : trainSteps(dtype);
report({ framework: "dtrain", mode, dtype, threads, ...result, peakRssBytes: peakRssBytes() });
