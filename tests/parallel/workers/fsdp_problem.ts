/**
 * The problems shared by the FSDP worker and the single-process reference in fsdp_test.ts: an
 * MLP whose layers shard unevenly (10 rows on 3 ranks, and a 2-row layer that leaves a rank
 * empty) and a small nn.GPT, deterministic global batches, and AdamW (its state is sharded too).
 * @module
 */

import { MLP } from "../../../src/nn/container.ts";
import { GPT } from "../../../src/nn/gpt.ts";
import type { Module } from "../../../src/nn/module.ts";
import { clipGradNorm } from "../../../src/nn/utils/clip_grad.ts";
import { AdamW } from "../../../src/optim/adamw.ts";
import { tensor } from "../../../src/tensor/creation.ts";
import { crossEntropy } from "../../../src/tensor/ops/cross_entropy.ts";
import { manualSeed } from "../../../src/tensor/random.ts";
import { tidy } from "../../../src/tensor/scope.ts";
import type { Tensor } from "../../../src/tensor/tensor.ts";
import { batchRows, INPUTS } from "./problem.ts";

/** Which model. */
export type Kind = "mlp" | "gpt";
/** Rows (sequences for the GPT) per rank and step. */
export const ROWS = 2;
/** Steps of the equivalence runs. */
export const STEPS = 4;
/** Backward passes per optimizer step in the accumulation runs. */
export const MICRO = 3;
const SEED = 7;
// No biases: the key bias gets no gradient, only float noise, which AdamW turns into lr-sized steps.
const GPT_CONFIG = { vocabSize: 16, blockSize: 8, nLayer: 2, nHead: 2, nEmbd: 8, bias: false };
const T = 6;

/** The model, from a fixed seed: `MLP([8, 10, 2, 4])` or a 2-block GPT. */
export function buildModel(kind: Kind): Module {
  manualSeed(SEED);
  return kind === "mlp" ? new MLP([INPUTS, 10, 2, 4]) : new GPT(GPT_CONFIG);
}

/** The submodules to wrap before the root: the MLP's Linears, the GPT's blocks. */
export function innerModules(model: Module): Module[] {
  if (model instanceof GPT) return [...model.transformer.h.children()];
  return [...model.children()].filter((m) => m.parameters().length > 0);
}

/** AdamW with weight decay, so that a wrong gradient or state in any step keeps showing. */
export function buildOptimizer(params: Tensor[]): AdamW {
  return new AdamW(params, { lr: 0.02, weightDecay: 0.1 });
}

/** The mean loss of `model` on rows `from..to` of global batch `index`, times `scale`. */
export function batchLoss(
  kind: Kind,
  model: Module,
  index: number,
  from: number,
  to: number,
  scale = 1,
): Tensor {
  let loss: Tensor;
  if (kind === "mlp") {
    const [xs, ys] = batchRows(index, from, to);
    loss = crossEntropy(model.forward(tensor(xs, [to - from, INPUTS])), tensor(ys, [to - from]));
  } else {
    const n = (to - from) * T, V = GPT_CONFIG.vocabSize;
    const token = (row: number, t: number) => (index * 7 + row * 3 + t * t * 5 + (row >> 1)) % V;
    const xs = Int32Array.from({ length: n }, (_, i) => token(from + Math.floor(i / T), i % T));
    const ys = Int32Array.from({ length: n }, (_, i) => token(from + Math.floor(i / T), i % T + 1));
    loss = (model as GPT).forward(tensor(xs, [to - from, T]), tensor(ys, [to - from, T])).loss;
  }
  return scale === 1 ? loss : loss.mul(scale);
}

/** Every state-dict entry's values by name. */
export function stateValues(state: Record<string, Tensor>): Record<string, number[]> {
  return Object.fromEntries(Object.entries(state).map(([k, t]) => [k, Array.from(t.toArray())]));
}

/**
 * One process on the whole global batch of every step (`worldSize × ROWS` rows per micro-batch,
 * the mean over all of them): what FSDP on `worldSize` ranks (or `worldSize[step]` in each step)
 * must end with. With `clip`, the
 * gradients are clipped to that total norm before each step; `norms` are the norms seen.
 */
export function trainReference(
  kind: Kind,
  worldSize: number | number[],
  steps: number,
  micro = 1,
  clip = 0,
): { final: Record<string, number[]>; norms: number[] } {
  const model = buildModel(kind);
  const optimizer = buildOptimizer(model.parameters());
  const norms: number[] = [];
  for (let step = 0; step < steps; step++) {
    tidy(() => {
      for (let m = 0; m < micro; m++) {
        const size = typeof worldSize === "number" ? worldSize : worldSize[step];
        batchLoss(kind, model, step * micro + m, 0, size * ROWS, 1 / micro).backward();
      }
      if (clip > 0) norms.push(clipGradNorm(model.parameters(), clip));
      optimizer.step();
      optimizer.zeroGrad();
    });
  }
  return { final: stateValues(model.stateDict()), norms };
}
