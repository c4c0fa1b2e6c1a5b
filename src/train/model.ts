/** The models and data the training job can run, chosen by name in the config. @module */

import { FashionMNIST } from "../data/fashion_mnist.ts";
import { SyntheticRegression } from "../data/synthetic.ts";
import { TextDataset } from "../data/text.ts";
import type { Dataset } from "../data/dataset.ts";
import { Linear } from "../nn/layers.ts";
import { MLP } from "../nn/container.ts";
import { GPT } from "../nn/gpt.ts";
import type { Module } from "../nn/module.ts";
import { crossEntropy, mseLoss } from "../tensor/ops/nn.ts";
import type { Tensor } from "../tensor/tensor.ts";
import type { TrainConfig } from "./config.ts";

/** A data set that collates whole batches natively: `[inputs, targets]`. */
export type BatchDataset = Dataset & { getBatch(indices: Int32Array): Tensor[] };

/**
 * How held-out data scores a model: the share of correct classes, or (for a language model) the
 * mean loss in nats per token.
 */
export type Metric = "accuracy" | "loss";

/** What the job trains on: the data, its shape, and the loss that fits it. */
export interface Task {
  /** Training samples. */
  train: BatchDataset;
  /** Held-out samples (the test set, or a language model's validation split), if any. */
  test: BatchDataset | null;
  /** How `test` scores the model. */
  metric: Metric;
  /** Input features per sample (tokens for a language model). */
  inputs: number;
  /** Outputs per sample (classes, regression targets, or the vocabulary). */
  outputs: number;
  /** The loss of a batch. */
  loss(output: Tensor, target: Tensor): Tensor;
}

/** Cross-entropy of logits [B, T, V] against next tokens [B, T], over every position. */
function languageModelLoss(logits: Tensor, targets: Tensor): Tensor {
  const v = logits.shape[logits.ndim - 1];
  return crossEntropy(logits.reshape([-1, v]), targets.reshape([-1]));
}

/** Loads the data set named in the config. */
export function loadTask(config: TrainConfig): Task {
  const root = config.dataRoot || undefined;
  if (config.dataset === "synthetic") {
    const train = new SyntheticRegression({
      size: 2048,
      inputs: 20,
      outputs: 1,
      seed: config.seed,
    });
    return { train, test: null, metric: "accuracy", inputs: 20, outputs: 1, loss: mseLoss };
  }
  if (config.dataset === "text") {
    const text = (split: "train" | "val") =>
      TextDataset.fortunes({ root, blockSize: config.blockSize, split });
    return {
      train: text("train"),
      test: text("val"),
      metric: "loss",
      inputs: config.blockSize,
      outputs: TextDataset.vocabSize,
      loss: languageModelLoss,
    };
  }
  return {
    train: new FashionMNIST({ root, train: true }),
    test: new FashionMNIST({ root, train: false }),
    metric: "accuracy",
    inputs: 784,
    outputs: 10,
    loss: (output, target) => crossEntropy(output, target),
  };
}

/** Builds the model named in the config for the task. */
export function buildModel(config: TrainConfig, task: Task): Module {
  if (config.model === "linear") return new Linear(task.inputs, task.outputs);
  if (config.model === "gpt") {
    return new GPT({
      vocabSize: task.outputs,
      blockSize: config.blockSize,
      nLayer: config.nLayer,
      nHead: config.nHead,
      nEmbd: config.nEmbd,
      dropout: config.dropout,
    });
  }
  return new MLP([task.inputs, ...config.hidden, task.outputs]);
}
