/**
 * The training problem shared by the DDP workers and the single-process reference in
 * ddp_test.ts: a small MLP classifier, deterministic global batches (the same in every process,
 * with no generator involved), and one SGD configuration.
 * @module
 */

import { MLP } from "../../../src/nn/container.ts";
import type { Module } from "../../../src/nn/module.ts";
import { SGD } from "../../../src/optim/sgd.ts";
import type { DDPOptions } from "../../../src/parallel/mod.ts";
import { tensor } from "../../../src/tensor/creation.ts";
import { crossEntropy } from "../../../src/tensor/ops/cross_entropy.ts";
import { manualSeed } from "../../../src/tensor/random.ts";
import { tidy } from "../../../src/tensor/scope.ts";
import type { Tensor } from "../../../src/tensor/tensor.ts";

/** Features, hidden width and classes of the MLP. */
export const INPUTS = 8, HIDDEN = 16, CLASSES = 4;
/** Rows per rank and step. */
export const ROWS = 6;
/** Synchronised steps of the equivalence runs. */
export const STEPS = 20;
/** Optimizer steps, and backward passes per step, of the `noSync` accumulation runs. */
export const NO_SYNC_STEPS = 5, MICRO_BATCHES = 3;
/**
 * A first bucket of 16 bytes, then 200: the MLP's parameters, last first, fill four buckets,
 * [4.bias] [4.weight] [2.bias 2.weight] [0.bias 0.weight], two of them shared.
 */
export const SMALL_BUCKETS: DDPOptions = {
  bucketCapMb: 200 / 2 ** 20,
  firstBucketMb: 16 / 2 ** 20,
};
/** How many buckets `SMALL_BUCKETS` makes of the MLP. */
export const SMALL_BUCKET_COUNT = 4;

/** `new MLP([8, hidden, hidden, 4])`, initialised from `seed`. */
export function buildModel(seed: number, hidden = HIDDEN): MLP {
  manualSeed(seed);
  return new MLP([INPUTS, hidden, hidden, CLASSES]);
}

/** SGD with momentum, so that a wrong gradient in any step keeps showing. */
export function buildOptimizer(model: Module): SGD {
  return new SGD(model.parameters(), { lr: 0.1, momentum: 0.9 });
}

/** Rows `from..to` of global batch `index`: inputs [n, 8] and class labels [n]. */
export function batchRows(index: number, from: number, to: number): [Float32Array, Int32Array] {
  const x = new Float32Array((to - from) * INPUTS);
  const y = new Int32Array(to - from);
  for (let row = from; row < to; row++) {
    for (let j = 0; j < INPUTS; j++) {
      x[(row - from) * INPUTS + j] = Math.sin(1.7 * index + 0.9 * row + 0.37 * j * (row % 5 + 1));
    }
    y[row - from] = (index * 7 + row * 3) % CLASSES;
  }
  return [x, y];
}

/** The mean cross-entropy of `model` on rows `from..to` of batch `index`, times `scale`. */
export function batchLoss(
  model: Module,
  index: number,
  from: number,
  to: number,
  scale = 1,
): Tensor {
  const [xs, ys] = batchRows(index, from, to);
  const x = tensor(xs, [to - from, INPUTS]);
  const y = tensor(ys, [to - from]);
  const loss = crossEntropy(model.forward(x), y);
  return scale === 1 ? loss : loss.mul(scale);
}

/** Every parameter's values by name. */
export function paramValues(model: Module): Record<string, number[]> {
  return Object.fromEntries(
    [...model.namedParameters()].map(([name, p]) => [name, Array.from(p.toArray())]),
  );
}

/** The gradients by name, leaving out parameters that have none. */
export function gradValues(model: Module): Record<string, number[]> {
  return Object.fromEntries(
    [...model.namedParameters()].filter(([, p]) => p.grad !== null).map((
      [name, p],
    ) => [name, Array.from(p.grad!.toArray())]),
  );
}

/** The gradients of `batchLoss(model, index, from, to, scale)` for the model from `seed`. */
export function localGradients(
  seed: number,
  index: number,
  from: number,
  to: number,
  scale: number,
): Record<string, number[]> {
  const model = buildModel(seed);
  tidy(() => batchLoss(model, index, from, to, scale).backward());
  return gradValues(model);
}

/**
 * Trains on one process with the whole global batch of every step: `steps` steps, each over
 * `micro` batches of `worldSize * ROWS` rows (the rows every rank's micro-batches hold together),
 * with the mean loss over all of them.
 */
export function trainReference(
  seed: number,
  worldSize: number,
  steps: number,
  micro = 1,
): Record<string, number[]> {
  const model = buildModel(seed);
  const optimizer = buildOptimizer(model);
  for (let step = 0; step < steps; step++) {
    tidy(() => {
      let loss: Tensor | null = null;
      for (let m = 0; m < micro; m++) {
        const part = batchLoss(model, step * micro + m, 0, worldSize * ROWS, 1 / micro);
        loss = loss === null ? part : loss.add(part);
      }
      loss!.backward();
      optimizer.step();
      optimizer.zeroGrad();
    });
  }
  return paramValues(model);
}
