/**
 * What the HSDP worker and hsdp_test.ts's one-process references share: fsdp_problem.ts's GPT
 * (dropout 0) trained with AdamW and clipGradNorm on a global batch of GLOBAL_ROWS sequences,
 * each data-parallel rank on its equal part, and a step resumed from a sharded checkpoint.
 * @module
 */

import { loadSharded } from "../../../src/checkpoint/sharded.ts";
import type { Module } from "../../../src/nn/module.ts";
import { clipGradNorm } from "../../../src/nn/utils/clip_grad.ts";
import type { Optimizer } from "../../../src/optim/optimizer.ts";
import { localShard } from "../../../src/parallel/mod.ts";
import { tidyAsync } from "../../../src/tensor/scope.ts";
import type { Tensor } from "../../../src/tensor/tensor.ts";
import { batchLoss, buildModel, buildOptimizer, stateValues } from "./fsdp_problem.ts";

/** Sequences of every step's global batch. */
export const GLOBAL_ROWS = 8;
/** Steps trained before the checkpoint; the resumed runs take one more. */
export const STEPS = 3;
/** The total gradient norm clipped to (below the GPT's, so that clipping acts). */
export const CLIP = 0.2;

/** A gradient's rows as one rank holds them (a whole gradient: rowStart 0, every row). */
export interface GradRows {
  rowStart: number;
  rows: number;
  values: number[];
}

/** What a training run saw: each step's loss, gradients (before clipping) and total norm. */
export interface Trace {
  losses: number[];
  grads: Record<string, GradRows>[];
  norms: number[];
}

/** Every parameter's gradient rows, by name. */
function gradRows(model: Module): Record<string, GradRows> {
  const out: Record<string, GradRows> = {};
  for (const [name, p] of model.namedParameters()) {
    const { rowStart, rows } = localShard(p);
    out[name] = { rowStart, rows, values: Array.from(p.grad!.toArray() as Float32Array) };
  }
  return out;
}

/**
 * Trains steps `from .. to - 1` on part `part` of `parts` of each global batch, in `micro`
 * backward passes over equal slices of it (each loss scaled by 1 / micro: their gradients sum to
 * the part's mean loss's); `backward` runs the backward pass (the FSDP root's `backward`, or the
 * loss's own).
 */
export async function trainSteps(
  model: Module,
  optimizer: Optimizer<{ lr: number }>,
  from: number,
  to: number,
  part: number,
  parts: number,
  backward: (loss: Tensor) => Promise<void> | void,
  micro = 1,
): Promise<Trace> {
  const trace: Trace = { losses: [], grads: [], norms: [] };
  const rows = GLOBAL_ROWS / parts, slice = rows / micro;
  for (let step = from; step < to; step++) {
    await tidyAsync(async () => {
      let total = 0;
      for (let m = 0; m < micro; m++) {
        const start = part * rows + m * slice;
        const loss = batchLoss("gpt", model, step, start, start + slice, 1 / micro);
        total += loss.item();
        await backward(loss);
      }
      trace.losses.push(total);
      trace.grads.push(gradRows(model));
      trace.norms.push(clipGradNorm(model.parameters(), CLIP));
      optimizer.step();
      optimizer.zeroGrad();
    });
  }
  return trace;
}

/** A fresh GPT and its AdamW, from fsdp_problem's seed. */
export function freshModel(): { model: Module; optimizer: Optimizer<{ lr: number }> } {
  const model = buildModel("gpt");
  return { model, optimizer: buildOptimizer(model.parameters()) };
}

/**
 * One process: loads the checkpoint in `dir` into a fresh model and takes step STEPS on the
 * whole batch; the weights after loading and after the step.
 */
export async function resumeInOneProcess(
  dir: string,
): Promise<{ loaded: Record<string, number[]>; final: Record<string, number[]> }> {
  const { model, optimizer } = freshModel();
  loadSharded(dir, { model, optimizer });
  const loaded = stateValues(model.stateDict());
  await trainSteps(model, optimizer, STEPS, STEPS + 1, 0, 1, (loss) => loss.backward());
  return { loaded, final: stateValues(model.stateDict()) };
}
