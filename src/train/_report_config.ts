/**
 * Which settings of the train job apply to a run, for its report page: a GPT's shape means nothing
 * to an MLP run, nanoGPT's iteration settings nothing to an epoch run (and `warmupSteps` nothing to
 * an iteration run, whose warmup is `warmupIters`), SGD's momentum nothing under AdamW.
 * @module
 */

import { EPOCH_ONLY, ITERATION_ONLY } from "./_training_kinds.ts";
import type { TrainConfig } from "./config.ts";

type Applies = (config: TrainConfig) => boolean;

const gpt: Applies = (c) => c.model === "gpt";
/** nanoGPT's train.py: `--dataset tokens` trains by iterations. */
const iterations: Applies = (c) => c.dataset === "tokens";
const epochs: Applies = (c) => !iterations(c);
const and = (...all: Applies[]): Applies => (c) => all.every((f) => f(c));

/** The settings that apply only to some runs; every other setting applies to all. */
const ONLY_WHEN: Partial<Record<keyof TrainConfig, Applies>> = {
  hidden: (c) => c.model === "mlp",
  blockSize: gpt,
  nLayer: gpt,
  nHead: gpt,
  nEmbd: gpt,
  dropout: gpt,
  bias: gpt,
  tp: gpt,
  pp: gpt,
  sequenceParallel: (c) => gpt(c) && c.tp > 1,
  lossParallel: (c) => gpt(c) && c.tp > 1,
  ppSchedule: (c) => gpt(c) && c.pp > 1,
  microbatches: (c) => gpt(c) && c.pp > 1,
  acEvery: (c) => c.ac === "selective",
  momentum: (c) => c.optimizer === "sgd",
  beta1: (c) => c.optimizer === "adamw",
  beta2: (c) => c.optimizer === "adamw",
  dpShard: (c) => c.strategy === "fsdp",
  dpReplicate: (c) => c.strategy === "fsdp",
  // The settings of one kind of training (_training_kinds.ts), some only under a schedule.
  ...Object.fromEntries(ITERATION_ONLY.map((field) => [field, iterations])),
  ...Object.fromEntries(EPOCH_ONLY.map((field) => [field, epochs])),
  snapshot: epochs,
  warmupSteps: and(epochs, (c) => c.lrSchedule !== "constant"),
  warmupIters: and(iterations, (c) => c.decayLr),
  lrDecayIters: and(iterations, (c) => c.decayLr),
  minLr: and(iterations, (c) => c.decayLr),
};

/**
 * The settings of `config` that apply to its run, in their order.
 *
 * @param config The run's settings.
 * @returns `[name, value]` pairs.
 */
export function applyingSettings(config: TrainConfig): [string, unknown][] {
  return Object.entries(config).filter(([key]) =>
    ONLY_WHEN[key as keyof TrainConfig]?.(config) ?? true
  );
}
