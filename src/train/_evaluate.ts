/**
 * Scoring held-out data in the train job: each rank takes its stride of the samples, and the sums
 * over the ranks make the score.
 * @module
 */

import type { Module } from "../nn/module.ts";
import { noGrad } from "../tensor/autograd.ts";
import { tidy } from "../tensor/scope.ts";
import type { Device } from "../tensor/storage.ts";
import type { Task } from "./model.ts";
import type { Layout } from "./_layout.ts";
import type { PipelinedGPT } from "./_pipeline.ts";
import { sumOverRanks } from "./_stats.ts";

/**
 * Rank `rank`'s batches of the held-out set's stride (samples rank, rank + worldSize, ...): the
 * indices of each and how many of them count (0 for a lockstep rank's stand-in sample).
 */
function* strides(
  task: Task,
  rank: number,
  worldSize: number,
  lockstep: boolean,
): Generator<{ indices: Int32Array; n: number }> {
  const test = task.test!, batch = task.metric === "loss" ? 32 : 1000;
  for (let round = 0; round * batch * worldSize < test.length; round++) {
    const start = round * batch * worldSize + rank;
    const n = Math.max(0, Math.min(batch, Math.ceil((test.length - start) / worldSize)));
    if (n === 0 && !lockstep) break;
    const indices = n === 0 ? Int32Array.of(0) : new Int32Array(n);
    for (let i = 0; i < n; i++) indices[i] = start + i * worldSize;
    yield { indices, n };
  }
}

/**
 * Scores rank `rank`'s stride of the task's held-out samples in evaluation mode: the number of
 * correct classes, or for a language model (`metric` "loss") the sum over samples of the mean
 * loss per token, on `device`. Returns `[score sum, samples]`; the caller sums them over ranks.
 *
 * With `lockstep` (a fully sharded model, whose forward gathers parameters from every rank) each
 * rank runs the same number of forwards: one whose stride has run out scores a sample it does not
 * count.
 */
export function scoreStride(
  model: Module,
  task: Task,
  rank: number,
  worldSize: number,
  device: Device = "cpu",
  lockstep = false,
): [number, number] {
  const test = task.test;
  if (test === null) return [0, 0];
  const language = task.metric === "loss";
  let score = 0, count = 0;
  for (const { indices, n } of strides(task, rank, worldSize, lockstep)) {
    const scored = tidy(() =>
      noGrad(() => {
        const [cpuX, cpuY] = test.getBatch(indices);
        const x = cpuX.to(device), y = cpuY.to(device);
        if (language) return task.loss(model, x, y).item() * indices.length;
        const predicted = task.predict(model, x).argmax(-1).toArray();
        const labels = y.toArray();
        let hits = 0;
        for (let i = 0; i < labels.length; i++) if (predicted[i] === labels[i]) hits++;
        return hits;
      })
    );
    score += n === 0 ? 0 : scored;
    count += n;
  }
  return [score, count];
}

/**
 * {@linkcode scoreStride} for a language model's pipeline (`--pp`): every rank of the pipeline
 * scores its dp rank's stride, the batches forward through the stages; each rank returns the
 * pipeline's sums. `lockstep` as there (a pipeline of fully sharded stages).
 */
export async function pipelineStride(
  pipeline: PipelinedGPT,
  task: Task,
  rank: number,
  worldSize: number,
  device: Device = "cpu",
  lockstep = false,
): Promise<[number, number]> {
  const test = task.test;
  if (test === null) return [0, 0];
  let score = 0, count = 0;
  for (const { indices, n } of strides(task, rank, worldSize, lockstep)) {
    const [cpuX, cpuY] = test.getBatch(indices);
    const x = cpuX.to(device), y = cpuY.to(device);
    try {
      score += (await pipeline.evalLoss(x, y)) * n;
      count += n;
    } finally {
      for (const t of new Set([cpuX, cpuY, x, y])) t.dispose();
    }
  }
  return [score, count];
}

/** What {@linkcode evaluate} scores: the model (or this rank's pipeline stages) and where. */
export interface Scored {
  /** The whole model, or this rank's part of it. */
  readonly model: Module;
  /** This rank's pipeline stages (`--pp`), or null. */
  readonly pipeline: PipelinedGPT | null;
  /** The task whose held-out set is scored. */
  readonly task: Task;
  /** This rank's place among the data-parallel ranks, and its tensor-parallel mesh. */
  readonly layout: Layout;
  /** Where the model lives. */
  readonly device: Device;
  /** Whether the model is fully sharded (its forward gathers parameters from every rank). */
  readonly sharded: boolean;
  /** The ranks of the job. */
  readonly worldSize: number;
}

/**
 * Scores the model on the whole held-out set, each rank taking its stride of it: the share of
 * correct classes, or a language model's mean loss per token (the task's `metric`); null without
 * a held-out set. Every rank calls it; the model is left in training mode.
 */
export async function evaluate(scored: Scored): Promise<number | null> {
  const { model, pipeline, task, layout, device, sharded, worldSize } = scored;
  if (task.test === null) return null;
  model.eval();
  // Strides by dp rank (a TP group or pipeline scores one stride together, counted once per
  // rank of it in both sums, which leaves their ratio as it is); lockstep when the forward
  // communicates.
  const { dpRank, dpSize } = layout;
  const [correct, count] = pipeline
    ? await pipelineStride(pipeline, task, dpRank, dpSize, device, sharded)
    : scoreStride(model, task, dpRank, dpSize, device, sharded || layout.tpMesh !== null);
  model.train();
  const [totalCorrect, total] = await sumOverRanks([correct, count], worldSize);
  return totalCorrect / total;
}

/** A score as the epoch's line shows it: `validation loss 1.2345` or `test accuracy 87.65%`. */
export function formatScore(task: Task, score: number | null): string {
  if (score === null) return "";
  return task.metric === "loss"
    ? `validation loss ${score.toFixed(4)}`
    : `test accuracy ${(score * 100).toFixed(2)}%`;
}
