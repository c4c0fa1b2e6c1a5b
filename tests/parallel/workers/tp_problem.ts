/**
 * The problem shared by the tensor-parallel worker and the single-process reference in
 * tp_test.ts: the tiny GPT (biases on, dropout 0), deterministic batches that every TP rank
 * reads whole, and three AdamW steps with clipGradNorm.
 * @module
 */

import { GPT } from "../../../src/nn/gpt.ts";
import { clipGradNorm } from "../../../src/nn/utils/clip_grad.ts";
import { AdamW } from "../../../src/optim/adamw.ts";
import { tensor } from "../../../src/tensor/creation.ts";
import { manualSeed } from "../../../src/tensor/random.ts";
import { tidy } from "../../../src/tensor/scope.ts";
import type { Tensor } from "../../../src/tensor/tensor.ts";

/** The model's shape (the tiny GPT). */
export const GPT_CONFIG = {
  vocabSize: 64,
  blockSize: 16,
  nLayer: 2,
  nHead: 4,
  nEmbd: 32,
  dropout: 0,
  bias: true,
};
/** Sequences per batch and their length. */
export const B = 2, T = 16;
/** Optimizer steps. */
export const STEPS = 3;
/** The total gradient norm clipped to (below the norms seen, so that clipping acts). */
export const CLIP = 0.5;

/** The model, from a fixed seed. */
export function buildModel(): GPT {
  manualSeed(11);
  return new GPT(GPT_CONFIG);
}

/** AdamW with weight decay, so that a wrong gradient in any step keeps showing. */
export function buildOptimizer(params: Tensor[]): AdamW {
  return new AdamW(params, { lr: 0.01, weightDecay: 0.1 });
}

/** Batch `step`'s tokens and targets (one target of -1, not scored). */
export function batch(step: number): [Tensor, Tensor] {
  const V = GPT_CONFIG.vocabSize, n = B * T;
  const token = (i: number) => (step * 13 + i * 7 + ((i * i) >> 2)) % V;
  const xs = Int32Array.from({ length: n }, (_, i) => token(i));
  const ys = Int32Array.from({ length: n }, (_, i) => (i === 5 ? -1 : token(i + 1)));
  return [tensor(xs, [B, T], { dtype: "i32" }), tensor(ys, [B, T], { dtype: "i32" })];
}

/** Every named parameter's values (or its gradient's). */
export function values(model: GPT, grad = false): Record<string, number[]> {
  return Object.fromEntries(
    [...model.namedParameters()].map(([k, p]) => [k, Array.from((grad ? p.grad! : p).toArray())]),
  );
}

/** What a run records: losses, first-step gradients, clipped norms and final weights. */
export interface Trace {
  losses: number[];
  grads: Record<string, number[]>;
  norms: number[];
  final: Record<string, number[]>;
}

/** Trains `model` for STEPS steps on the batches, clipping, and records the trace. */
export function train(model: GPT): Trace {
  const optimizer = buildOptimizer(model.parameters());
  const trace: Trace = { losses: [], grads: {}, norms: [], final: {} };
  for (let step = 0; step < STEPS; step++) {
    tidy(() => {
      const [x, y] = batch(step);
      const { loss } = model.forward(x, y);
      trace.losses.push(loss.item());
      loss.backward();
      if (step === 0) trace.grads = values(model, true);
      trace.norms.push(clipGradNorm(model.parameters(), CLIP));
      optimizer.step();
      optimizer.zeroGrad();
    });
  }
  trace.final = values(model);
  return trace;
}
