/**
 * Default initialisation of Linear, LayerNorm and Embedding against PyTorch's distributions
 * (init.json).
 * @module
 */

import assert from "node:assert/strict";
import { manualSeed, nn, type Tensor, tidy } from "../../mod.ts";
import { loadCases } from "../_harness/fixtures.ts";

interface Statistics {
  distribution: "uniform" | "normal" | "constant";
  shape: number[];
  bound?: number;
  mean?: number;
  std?: number;
  value?: number;
}

interface InitCase {
  name: string;
  op: "linearInit" | "layerNormInit" | "embeddingInit";
  args: Record<string, number & number[]>;
  weight: Statistics;
  bias?: Statistics;
}

/**
 * Checks a tensor against its distribution: the shape, the range, and the sample mean and
 * standard deviation within five standard errors (a deterministic check: the RNG is seeded).
 */
function checkDistribution(t: Tensor, s: Statistics, what: string): void {
  assert.deepEqual(t.shape, s.shape, `${what} shape`);
  const data = t.toArray();
  const n = data.length;
  if (s.distribution === "constant") {
    assert.ok(data.every((v) => v === s.value), `${what}: every element is ${s.value}`);
    return;
  }
  let sum = 0, sumSq = 0, maxAbs = 0;
  for (const v of data) {
    sum += v;
    sumSq += v * v;
    maxAbs = Math.max(maxAbs, Math.abs(v));
  }
  const mean = sum / n, std = Math.sqrt(sumSq / n - mean * mean);
  const sigma = s.std!;
  // Excess kurtosis: -1.2 for a uniform distribution, 0 for a normal one.
  const kurtosis = s.distribution === "uniform" ? 1.8 : 3;
  assert.ok(
    Math.abs(mean - s.mean!) <= 5 * sigma / Math.sqrt(n),
    `${what}: mean ${mean}, expected ${s.mean} (n = ${n})`,
  );
  const relStd = Math.abs(std / sigma - 1);
  assert.ok(
    relStd <= 5 * Math.sqrt((kurtosis - 1) / (4 * n)),
    `${what}: std ${std}, expected ${sigma} (${(relStd * 100).toFixed(2)}% off, n = ${n})`,
  );
  if (s.distribution === "uniform") {
    assert.ok(maxAbs <= s.bound!, `${what}: max |value| ${maxAbs} is above the bound ${s.bound}`);
    if (n >= 1000) assert.ok(maxAbs > 0.99 * s.bound!, `${what}: max |value| ${maxAbs}`);
  } else {
    assert.ok(maxAbs < 7 * sigma, `${what}: max |value| ${maxAbs}`);
  }
}

for (const c of loadCases<InitCase>("init.json")) {
  Deno.test(`default initialisation matches PyTorch's distribution: ${c.name}`, () => {
    tidy(() => {
      manualSeed(0);
      let module: nn.Linear | nn.LayerNorm | nn.Embedding;
      if (c.op === "linearInit") {
        module = new nn.Linear(c.args.inFeatures, c.args.outFeatures);
      } else if (c.op === "layerNormInit") {
        module = new nn.LayerNorm(c.args.normalizedShape);
      } else if (c.op === "embeddingInit") {
        module = new nn.Embedding(c.args.numEmbeddings, c.args.embeddingDim);
      } else {
        throw new Error(`${c.name}: unknown init op "${(c as InitCase).op}"`);
      }
      checkDistribution(module.weight!, c.weight, `${c.name} weight`);
      if (c.bias) {
        assert.ok("bias" in module && module.bias, `${c.name} has a bias`);
        checkDistribution(module.bias, c.bias, `${c.name} bias`);
      }
      for (const p of module.parameters()) {
        assert.ok(p.requiresGrad && p.persistent && p.isLeaf, `${c.name} parameters are leaves`);
      }
    });
  });
}
