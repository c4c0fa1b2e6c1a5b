/**
 * The problem shared by the pipeline workers and the single-process reference in the pipeline
 * tests: a tiny GPT (8 blocks, so that it splits into 2, 4 or 8 stages), a batch of 8 sequences
 * (one per microbatch), and three AdamW steps; what a run records, by parameter name.
 * @module
 */

import assert from "node:assert/strict";
import { GPT } from "../../../src/nn/gpt.ts";
import type { Module } from "../../../src/nn/module.ts";
import { AdamW } from "../../../src/optim/adamw.ts";
import type { PipelineSchedule } from "../../../src/parallel/mod.ts";
import { tensor } from "../../../src/tensor/creation.ts";
import { crossEntropy } from "../../../src/tensor/ops/cross_entropy.ts";
import { manualSeed } from "../../../src/tensor/random.ts";
import type { Tensor } from "../../../src/tensor/tensor.ts";
import { relativeError } from "../../_harness/close.ts";

/** The model's shape. */
export const GPT_CONFIG = {
  vocabSize: 32,
  blockSize: 8,
  nLayer: 8,
  nHead: 2,
  nEmbd: 16,
  dropout: 0,
  // Without biases: the key bias's gradient is zero, so AdamW's steps on it are float noise
  // amplified, which no two computation orders share.
  bias: false,
};
/** Sequences per batch (one per microbatch), their length, microbatches, optimizer steps. */
export const B = 8, T = 8, MICROBATCHES = 8, STEPS = 3;

/** The whole model, from a fixed seed (every rank builds it, then keeps its stages). */
export function buildModel(): GPT {
  manualSeed(7);
  return new GPT(GPT_CONFIG);
}

/**
 * AdamW with weight decay on every parameter of `modules` (each once: one process's first and
 * last stage share the tied embedding), so that a wrong gradient keeps showing.
 */
export function buildOptimizer(modules: Module[]): AdamW {
  const params = [...new Set(modules.flatMap((m) => m.parameters()))];
  return new AdamW(params, { lr: 0.01, weightDecay: 0.1 });
}

/** The loss of logits [b, T, V] against targets [b, T]: nanoGPT's mean cross-entropy. */
export function gptLoss(logits: Tensor, targets: Tensor): Tensor {
  return crossEntropy(logits.reshape([-1, GPT_CONFIG.vocabSize]), targets.reshape([-1]));
}

/** Step `step`'s tokens and targets (every target scored, so microbatch means average). */
export function batch(step: number): [Tensor, Tensor] {
  const V = GPT_CONFIG.vocabSize, n = B * T;
  const token = (i: number) => (step * 13 + i * 7 + ((i * i) >> 2)) % V;
  const xs = Int32Array.from({ length: n }, (_, i) => token(i));
  const ys = Int32Array.from({ length: n }, (_, i) => token(i + 1));
  return [tensor(xs, [B, T], { dtype: "i32" }), tensor(ys, [B, T], { dtype: "i32" })];
}

/** What a run records: each step's loss, first-step gradients and final weights by name. */
export interface Trace {
  losses: number[];
  grads: Record<string, number[]>;
  final: Record<string, number[]>;
}

/** Every state-dict entry's values (or its gradient's): both names of the tied embedding. */
function values(module: Module, grad: boolean): Record<string, number[]> {
  return Object.fromEntries(
    Object.entries(module.stateDict()).map((
      [k, p],
    ) => [k, Array.from((grad ? p.grad! : p).toArray())]),
  );
}

/** The reference: the whole model trained on the whole batch in one process. */
export function trainWhole(): Trace {
  const model = buildModel(), opt = buildOptimizer([model]);
  const trace: Trace = { losses: [], grads: {}, final: {} };
  for (let step = 0; step < STEPS; step++) {
    const [x, y] = batch(step);
    opt.zeroGrad();
    const { loss } = model.forward(x, y);
    loss.backward();
    trace.losses.push(loss.item());
    if (step === 0) trace.grads = values(model, true);
    opt.step();
  }
  trace.final = values(model, false);
  return trace;
}

/**
 * This rank's stages trained by `schedule`: losses (the mean of the microbatch losses, on the
 * rank holding the last stage; empty elsewhere), and the stages' first-step gradients and final
 * weights by the whole model's names.
 */
export async function trainPipelined(
  modules: Module[],
  schedule: PipelineSchedule,
  holdsFirst: boolean,
  holdsLast: boolean,
): Promise<Trace> {
  const opt = buildOptimizer(modules);
  const trace: Trace = { losses: [], grads: {}, final: {} };
  for (let step = 0; step < STEPS; step++) {
    const [x, y] = batch(step);
    opt.zeroGrad();
    const losses: Tensor[] = [];
    await schedule.step(holdsFirst ? x : undefined, holdsLast ? { target: y, losses } : {});
    if (holdsLast) trace.losses.push(losses.reduce((s, l) => s + l.item(), 0) / losses.length);
    if (step === 0) { for (const m of modules) Object.assign(trace.grads, values(m, true)); }
    opt.step();
  }
  for (const m of modules) Object.assign(trace.final, values(m, false));
  return trace;
}

/**
 * Fails unless what `got` (one rank's pipelined run) holds matches `want` within 1e-5: its
 * losses, if it has them, relatively; each of its gradients and final weights in relative L2.
 *
 * @returns The largest relative error seen.
 */
export function assertSame(got: Trace, want: Trace, what: string): number {
  let worst = 0;
  if (got.losses.length > 0) {
    assert.equal(got.losses.length, want.losses.length, `${what}: losses`);
    got.losses.forEach((loss, k) => {
      const err = Math.abs(loss - want.losses[k]) / want.losses[k];
      assert.ok(err <= 1e-5, `${what}: loss ${k} ${loss} vs ${want.losses[k]}`);
      worst = Math.max(worst, err);
    });
  }
  for (const kind of ["grads", "final"] as const) {
    for (const [name, v] of Object.entries(got[kind])) {
      assert.ok(name in want[kind], `${what}: ${name} is not a parameter of the whole model`);
      const err = relativeError(v, want[kind][name], `${what}: ${name}`);
      assert.ok(err <= 1e-5, `${what}: ${kind} of ${name} has relative error ${err}`);
      worst = Math.max(worst, err);
    }
  }
  return worst;
}
