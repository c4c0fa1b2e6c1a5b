/**
 * The matrix products of one GPT-2 124M forward at block 1024, micro-batch 1 (`linear` of
 * [1024, in] by [out, in]: c_attn, attn c_proj, c_fc, mlp c_proj, lm_head), timed in dtrain with
 * 2 threads; bench/gpt2_124m_matmul.py times the same in PyTorch. It tells how much of the
 * GPT-2 124M ratio is the matrix engine. Prints one JSON line: GFLOP/s per shape (best of 3).
 * @module
 */

import { randn, setNumThreads, tidy } from "../mod.ts";
import { linear } from "../src/tensor/ops/matmul.ts";

setNumThreads(Number(Deno.args[0] ?? 2));
const shapes: [string, number, number][] = [
  ["c_attn", 768, 2304],
  ["attn.c_proj", 768, 768],
  ["c_fc", 768, 3072],
  ["mlp.c_proj", 3072, 768],
  ["lm_head", 768, 50304],
];
const gflops: Record<string, number> = {};
for (const [name, inF, outF] of shapes) {
  const x = randn([1024, inF]);
  const w = randn([outF, inF]);
  let best = Infinity;
  for (let rep = 0; rep < 4; rep++) {
    const start = performance.now();
    tidy(() => void linear(x, w)); // CPU products run synchronously
    if (rep > 0) best = Math.min(best, performance.now() - start);
  }
  gflops[name] = (2 * 1024 * inF * outF) / (best / 1000) / 1e9;
}
console.log(JSON.stringify({ framework: "dtrain", gflops }));
