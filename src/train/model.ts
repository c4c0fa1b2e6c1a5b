/** The models, optimizers and data the training job can run, chosen by name in the config. @module */

import { FashionMNIST } from "../data/fashion_mnist.ts";
import { SyntheticRegression } from "../data/synthetic.ts";
import { TextDataset } from "../data/text.ts";
import type { Dataset } from "../data/dataset.ts";
import { Linear } from "../nn/layers.ts";
import { MLP } from "../nn/container.ts";
import { GPT } from "../nn/gpt.ts";
import { PipelineRankModule } from "./_pipeline.ts";
import type { Module } from "../nn/module.ts";
import { AdamW } from "../optim/adamw.ts";
import type { Optimizer } from "../optim/optimizer.ts";
import { SGD } from "../optim/sgd.ts";
import { type FSDPModule, fullyShard } from "../parallel/fsdp/fully_shard.ts";
import type { DeviceMesh } from "../distributed/device_mesh.ts";
import type { MixedPrecisionPolicy } from "../parallel/mixed_precision.ts";
import { withAutocast } from "./precision.ts";
import { mseLoss } from "../tensor/ops/nn.ts";
import { crossEntropy } from "../tensor/ops/cross_entropy.ts";
import type { Tensor } from "../tensor/tensor.ts";
import type { TrainConfig } from "./config.ts";
import { GPT2_PADDED_VOCAB, readTokenMeta } from "./_tokens.ts";

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
  /** Input features per sample (a language model reads `--block-size` tokens instead). */
  inputs: number;
  /** Outputs per sample (classes, regression targets, or the vocabulary). */
  outputs: number;
  /** The loss of a batch: `model`'s forward on `input`, scored against `target`. */
  loss(model: Module, input: Tensor, target: Tensor): Tensor;
  /** `model`'s forward on `input` (under autocast with `--dtype bf16`, as the loss). */
  predict(model: Module, input: Tensor): Tensor;
}

/** The input and output sizes of each data set, known without loading it. */
export const DATASET_SHAPES: Record<TrainConfig["dataset"], Pick<Task, "inputs" | "outputs">> = {
  synthetic: { inputs: 20, outputs: 1 },
  "fashion-mnist": { inputs: 784, outputs: 10 },
  text: { inputs: 1, outputs: TextDataset.vocabSize },
  // Known from meta.json only (taskShape reads it); nanoGPT's GPT-2 vocabulary bounds it.
  tokens: { inputs: 1, outputs: GPT2_PADDED_VOCAB },
};

/** The input and output sizes of the config's task: for `--dataset tokens`, meta.json's vocabulary. */
export function taskShape(config: TrainConfig): Pick<Task, "inputs" | "outputs"> {
  if (config.dataset !== "tokens") return DATASET_SHAPES[config.dataset];
  return { inputs: 1, outputs: readTokenMeta(config.dataDir).vocabSize };
}

/**
 * A language model's own loss (nanoGPT's `_, loss = model(X, Y)`): the GPT's cross-entropy of its
 * logits against the next tokens [B, T], over every position. Only `--model gpt` trains on text.
 */
function languageModelLoss(model: Module, tokens: Tensor, targets: Tensor): Tensor {
  return (model as GPT).forward(tokens, targets).loss;
}

/**
 * Loads the data set named in the config; its loss and forward run under autocast with
 * `--dtype bf16` (precision.ts).
 */
export function loadTask(config: TrainConfig): Task {
  const task = loadData(config);
  return {
    ...task,
    loss: withAutocast(config, task.loss),
    predict: withAutocast(config, (model, input) => model.forward(input)),
  };
}

function loadData(config: TrainConfig): Omit<Task, "predict"> {
  if (config.dataset === "tokens") {
    throw new Error("loadTask: --dataset tokens trains by iterations (iter_trainer.ts)");
  }
  const shape = DATASET_SHAPES[config.dataset];
  const root = config.dataRoot || undefined;
  if (config.dataset === "synthetic") {
    const train = new SyntheticRegression({ size: 2048, ...shape, seed: config.seed });
    const loss = (model: Module, x: Tensor, y: Tensor) => mseLoss(model.forward(x), y);
    return { train, test: null, metric: "accuracy", ...shape, loss };
  }
  if (config.dataset === "text") {
    const text = (split: "train" | "val") =>
      TextDataset.fortunes({ root, blockSize: config.blockSize, split });
    return {
      train: text("train"),
      test: text("val"),
      metric: "loss",
      ...shape,
      loss: languageModelLoss,
    };
  }
  return {
    train: new FashionMNIST({ root, train: true }),
    test: new FashionMNIST({ root, train: false }),
    metric: "accuracy",
    ...shape,
    loss: (model, x, y) => crossEntropy(model.forward(x), y),
  };
}

/** Builds the model named in the config for a task of these sizes. */
export function buildModel(config: TrainConfig, task: Pick<Task, "inputs" | "outputs">): Module {
  if (config.model === "linear") return new Linear(task.inputs, task.outputs);
  if (config.model === "gpt") {
    return new GPT({
      vocabSize: task.outputs,
      blockSize: config.blockSize,
      nLayer: config.nLayer,
      nHead: config.nHead,
      nEmbd: config.nEmbd,
      dropout: config.dropout,
      bias: config.bias,
    });
  }
  return new MLP([task.inputs, ...config.hidden, task.outputs]);
}

/**
 * Shards `model` for `--strategy fsdp`, in FSDP2's pattern: each GPT block, or each layer of an
 * MLP, is a group of its own (gathered only for its forward and backward), then the root takes
 * what is left (a GPT's embeddings and final norm), every group under `mpPolicy` (`--dtype`'s,
 * precision.ts), over the world group or `mesh` (1-D, or 2-D for HSDP: replicate × shard). Build
 * the optimizer afterwards, over the shards.
 */
export function fullyShardModel(
  model: Module,
  mpPolicy?: MixedPrecisionPolicy,
  mesh?: DeviceMesh,
): FSDPModule {
  const units = model instanceof GPT
    ? [...model.transformer.h.children()]
    : [...model.children()].filter((m) => m.parameters().length > 0);
  const options = mesh === undefined ? { mpPolicy } : { mpPolicy, mesh };
  for (const unit of units) fullyShard(unit, options);
  return fullyShard(model, options);
}

/**
 * Builds the optimizer named in the config over `model`'s parameters. A GPT's weight decay falls
 * only on its matrices and embeddings, as nanoGPT's `configure_optimizers` does.
 */
export function buildOptimizer(config: TrainConfig, model: Module): Optimizer<{ lr: number }> {
  const params = model.parameters();
  if (config.optimizer === "adamw") {
    const betas: [number, number] = [config.beta1, config.beta2];
    if (model instanceof GPT) {
      return model.configureOptimizers(config.weightDecay, config.lr, betas);
    }
    if (model instanceof PipelineRankModule) {
      // A rank's pipeline stages, grouped as the whole GPT's configureOptimizers groups them.
      const decay = params.filter((p) => p.ndim >= 2), noDecay = params.filter((p) => p.ndim < 2);
      return new AdamW([
        { params: decay, weightDecay: config.weightDecay },
        { params: noDecay, weightDecay: 0 },
      ], { lr: config.lr, betas });
    }
    return new AdamW(params, { lr: config.lr, weightDecay: config.weightDecay, betas });
  }
  return new SGD(params, {
    lr: config.lr,
    momentum: config.momentum,
    weightDecay: config.weightDecay,
  });
}
