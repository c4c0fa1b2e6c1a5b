/** The models, optimizers and data the training job can run, chosen by name in the config. @module */

import { FashionMNIST } from "../data/fashion_mnist.ts";
import { SyntheticRegression } from "../data/synthetic.ts";
import type { Dataset } from "../data/dataset.ts";
import { Linear } from "../nn/layers.ts";
import { MLP } from "../nn/container.ts";
import type { Module } from "../nn/module.ts";
import { AdamW } from "../optim/adamw.ts";
import type { Optimizer } from "../optim/optimizer.ts";
import { SGD } from "../optim/sgd.ts";
import { crossEntropy, mseLoss } from "../tensor/ops/nn.ts";
import type { Tensor } from "../tensor/tensor.ts";
import type { TrainConfig } from "./config.ts";

/** A data set that collates whole batches natively: `[inputs, targets]`. */
export type BatchDataset = Dataset & { getBatch(indices: Int32Array): Tensor[] };

/** What the job trains on: the data, its shape, and the loss that fits it. */
export interface Task {
  /** Training samples. */
  train: BatchDataset;
  /** Held-out samples for accuracy, when the task is classification. */
  test: BatchDataset | null;
  /** Input features per sample. */
  inputs: number;
  /** Outputs per sample (classes, or regression targets). */
  outputs: number;
  /** The loss of a batch. */
  loss(output: Tensor, target: Tensor): Tensor;
}

/** The input and output sizes of each data set, known without loading it. */
export const DATASET_SHAPES: Record<TrainConfig["dataset"], Pick<Task, "inputs" | "outputs">> = {
  synthetic: { inputs: 20, outputs: 1 },
  "fashion-mnist": { inputs: 784, outputs: 10 },
};

/** Loads the data set named in the config. */
export function loadTask(config: TrainConfig): Task {
  const shape = DATASET_SHAPES[config.dataset];
  if (config.dataset === "synthetic") {
    const train = new SyntheticRegression({ size: 2048, ...shape, seed: config.seed });
    return { train, test: null, ...shape, loss: mseLoss };
  }
  const root = config.dataRoot;
  return {
    train: new FashionMNIST({ root, train: true }),
    test: new FashionMNIST({ root, train: false }),
    ...shape,
    loss: (output, target) => crossEntropy(output, target),
  };
}

/** Builds the model named in the config for a task of these sizes. */
export function buildModel(config: TrainConfig, task: Pick<Task, "inputs" | "outputs">): Module {
  if (config.model === "linear") return new Linear(task.inputs, task.outputs);
  return new MLP([task.inputs, ...config.hidden, task.outputs]);
}

/** Builds the optimizer named in the config over `model`'s parameters. */
export function buildOptimizer(config: TrainConfig, model: Module): Optimizer<{ lr: number }> {
  const params = model.parameters();
  return config.optimizer === "adamw"
    ? new AdamW(params, { lr: config.lr, weightDecay: config.weightDecay })
    : new SGD(params, {
      lr: config.lr,
      momentum: config.momentum,
      weightDecay: config.weightDecay,
    });
}
