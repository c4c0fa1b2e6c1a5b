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
import { tidy, tidyAsync } from "../../../src/tensor/scope.ts";
import type { Module } from "../../../src/nn/module.ts";
import { fullyShard, localShard } from "../../../src/parallel/fsdp/fully_shard.ts";
import { applyActivationCheckpointing } from "../../../src/parallel/activation_checkpoint.ts";
import { parallelizeGPT } from "../../../src/parallel/tensor_parallel/gpt_plan.ts";
import type { DeviceMesh } from "../../../src/distributed/mod.ts";
import {
  Shard,
  shardRanges,
  tensorParallelPlacement,
} from "../../../src/parallel/tensor_parallel/placement.ts";
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

/**
 * Batch `step`'s tokens and targets, `rows` sequences (one target of -1, not scored, unless
 * `ignored` is false: data-parallel parts must count the same targets for their mean losses to
 * average to the whole batch's).
 */
export function batch(step: number, ignored = true, rows = B): [Tensor, Tensor] {
  const V = GPT_CONFIG.vocabSize, n = rows * T;
  const token = (i: number) => (step * 13 + i * 7 + ((i * i) >> 2)) % V;
  const xs = Int32Array.from({ length: n }, (_, i) => token(i));
  const ys = Int32Array.from({ length: n }, (_, i) => (i === 5 && ignored ? -1 : token(i + 1)));
  return [tensor(xs, [rows, T], { dtype: "i32" }), tensor(ys, [rows, T], { dtype: "i32" })];
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

/** How a rank holds a parameter: its TP placement (dim null: replicated) and its FSDP rows. */
export interface Held {
  dim: number | null;
  chunks: number;
  fullShape: number[];
  rowStart: number;
  rows: number;
}

/**
 * The part of a whole tensor (row-major `full`) that a rank holds: TP rank `rank` of `size`'s
 * shard under `held`, then, if FSDP shards it, the rows `held.rowStart ..` of that shard.
 */
export function shardOf(full: number[], held: Held, rank: number, size: number): number[] {
  const shape = held.fullShape;
  let local = full, localShape = shape;
  if (held.dim !== null) {
    const dim = held.dim < 0 ? held.dim + shape.length : held.dim;
    const ranges = shardRanges(shape[dim], held.chunks, rank, size);
    const inner = shape.slice(dim + 1).reduce((a, b) => a * b, 1);
    const outer = shape.slice(0, dim).reduce((a, b) => a * b, 1);
    local = [];
    for (let o = 0; o < outer; o++) {
      for (const { start, length } of ranges) {
        const from = (o * shape[dim] + start) * inner;
        local.push(...full.slice(from, from + length * inner));
      }
    }
    localShape = shape.map((n, d) => (d === dim ? n / size : n));
  }
  const rowNumel = localShape.slice(1).reduce((a, b) => a * b, 1);
  return local.slice(held.rowStart * rowNumel, (held.rowStart + held.rows) * rowNumel);
}

/** What each parameter of `model` holds, by name (see {@linkcode Held}). */
export function placements(model: Module): Record<string, Held> {
  return Object.fromEntries([...model.namedParameters()].map(([k, p]) => {
    const placed = tensorParallelPlacement(p);
    const dim = placed?.placement instanceof Shard ? placed.placement.dim : null;
    const { rowStart, rows, shape } = localShard(p);
    return [k, {
      dim,
      chunks: placed?.chunks ?? 1,
      fullShape: [...(placed?.fullShape ?? shape)],
      rowStart,
      rows,
    }];
  }));
}

/**
 * Trains `model` for STEPS clipped steps on part `part` of `parts` of each batch of `batchRows`
 * sequences (rows of it, every target scored), running backward with `backward` (FSDP's root
 * `backward`, or the loss's).
 */
export async function trainParts(
  model: GPT,
  part: number,
  parts: number,
  backward: (loss: Tensor) => Promise<void> | void,
  batchRows = B,
): Promise<Trace> {
  const optimizer = buildOptimizer(model.parameters());
  const trace: Trace = { losses: [], grads: {}, norms: [], final: {} };
  const rows = batchRows / parts;
  for (let step = 0; step < STEPS; step++) {
    await tidyAsync(async () => {
      const [x, y] = batch(step, false, batchRows);
      const mine = (t: Tensor) => t.narrow(0, part * rows, rows).contiguous();
      const { loss } = model.forward(mine(x), mine(y));
      trace.losses.push(loss.item());
      await backward(loss);
      if (step === 0) trace.grads = values(model, true);
      trace.norms.push(clipGradNorm(model.parameters(), CLIP));
      optimizer.step();
      optimizer.zeroGrad();
    });
  }
  trace.final = values(model);
  return trace;
}

/** One TP × FSDP scenario: sequence parallelism on the tp dimension, full activation checkpointing. */
export interface Case {
  label: string;
  sequenceParallel: boolean;
  ac: boolean;
}

/**
 * Case `c`: the tiny GPT made tensor-parallel on `tp`, optionally activation-checkpointed, then
 * fully sharded per block and on the root over `dp` (1-D: FSDP; 2-D: HSDP), torchtitan's order,
 * and trained by {@linkcode trainParts} on part `part` of `parts` of batches of `batchRows`: its
 * trace, the blocks checkpointed, what each parameter holds and the milliseconds it took.
 */
export async function trainCase(
  c: Case,
  tp: DeviceMesh,
  dp: DeviceMesh,
  part: number,
  parts: number,
  batchRows = B,
) {
  const started = performance.now();
  const model = parallelizeGPT(buildModel(), tp, { sequenceParallel: c.sequenceParallel });
  const wrapped = c.ac ? applyActivationCheckpointing(model, { mode: "full" }) : [];
  for (const block of model.transformer.h) fullyShard(block, { mesh: dp });
  const sharded = fullyShard(model, { mesh: dp });
  const trace = await trainParts(model, part, parts, (loss) => sharded.backward(loss), batchRows);
  return { ...trace, wrapped, placements: placements(model), ms: performance.now() - started };
}
