/**
 * The training job's configuration schema and defaults (config.ts parses the command line and
 * the `--config` file into it; usage.ts describes it).
 * @module
 */

import { z } from "zod";
import { LAUNCHER_DEFAULTS, LauncherFieldsSchema } from "../launch/options.ts";
import { FAMILY_NAMES } from "../tensor/device/mod.ts";
import { spelled } from "./_flags.ts";

/**
 * An invalid configuration or command line; `field` names the culprit, and the message names it
 * as the user set it (see [Note: errors name what the user typed] in _flags.ts).
 */
export class ConfigError extends Error {
  /**
   * @param field The offending field (camelCase) or flag.
   * @param message What is wrong with it.
   */
  constructor(readonly field: string, message: string) {
    super(`${spelled(field)}: ${message}`);
    this.name = "ConfigError";
  }
}

const positiveInt = z.number().int().positive();
/** A data-parallel degree: a positive integer, or -1 for "the rest" (torchtitan's spelling). */
const degree = z.number().int().refine((n) => n > 0 || n === -1, {
  message: "expected a positive integer, or -1 for the rest of the world size",
});

/** The schema of a training configuration (also the JSON accepted by `--config`). */
export const TrainConfigSchema = z.object({
  epochs: z.number().int().nonnegative(),
  saveEvery: positiveInt,
  saveEverySteps: z.number().int().nonnegative(),
  batchSize: positiveInt,
  lr: z.number().positive(),
  momentum: z.number().min(0).lt(1),
  weightDecay: z.number().nonnegative(),
  optimizer: z.enum(["sgd", "adamw"]),
  lrSchedule: z.enum(["constant", "cosine"]),
  warmupSteps: z.number().int().nonnegative(),
  model: z.enum(["mlp", "linear", "gpt"]),
  hidden: z.array(positiveInt).min(1),
  blockSize: positiveInt,
  nLayer: positiveInt,
  nHead: positiveInt,
  nEmbd: positiveInt,
  dropout: z.number().min(0).lt(1),
  dataset: z.enum(["fashion-mnist", "synthetic", "text", "tokens"]),
  dataRoot: z.string(),
  dataDir: z.string(),
  outDir: z.string(),
  bias: z.boolean(),
  beta1: z.number().min(0).lt(1),
  beta2: z.number().min(0).lt(1),
  gradClip: z.number().nonnegative(),
  maxIters: z.number().int().nonnegative(),
  evalInterval: positiveInt,
  evalIters: positiveInt,
  logInterval: positiveInt,
  evalOnly: z.boolean(),
  alwaysSaveCheckpoint: z.boolean(),
  initFrom: z.string().min(1),
  gradientAccumulationSteps: positiveInt,
  decayLr: z.boolean(),
  warmupIters: z.number().int().nonnegative(),
  lrDecayIters: z.number().int().nonnegative(),
  minLr: z.number().nonnegative(),
  snapshot: z.string().min(1),
  asyncSnapshots: z.boolean(),
  seed: z.number().int().nonnegative(),
  threads: z.number().int().nonnegative(),
  maxSteps: z.number().int().nonnegative(),
  logEvery: z.number().int().nonnegative(),
  // A family of src/tensor/device/family.ts: a new family's record is all `--device` needs.
  device: z.enum(FAMILY_NAMES),
  dtype: z.enum(["f32", "bf16"]),
  strategy: z.enum(["ddp", "fsdp"]),
  tp: positiveInt,
  pp: positiveInt,
  ppSchedule: z.enum(["gpipe", "1f1b", "interleaved"]),
  microbatches: z.number().int().nonnegative(),
  dpShard: degree,
  dpReplicate: degree,
  sequenceParallel: z.boolean(),
  lossParallel: z.boolean(),
  ac: z.enum(["none", "full", "selective"]),
  acEvery: positiveInt,
  profile: z.string(),
  stragglerMs: z.number().nonnegative(),
  peakFlops: z.number().nonnegative(),
}).extend(LauncherFieldsSchema.shape).strict();

/** A validated training configuration. */
export type TrainConfig = z.infer<typeof TrainConfigSchema>;

/** The defaults: a 2-process DDP run that trains the MLP on Fashion-MNIST in well under a minute. */
export const DEFAULTS: TrainConfig = {
  epochs: 3,
  saveEvery: 1,
  saveEverySteps: 0,
  batchSize: 64,
  lr: 0.05,
  momentum: 0.9,
  weightDecay: 0,
  optimizer: "sgd",
  lrSchedule: "constant",
  warmupSteps: 0,
  model: "mlp",
  hidden: [512, 512],
  blockSize: 128,
  nLayer: 4,
  nHead: 4,
  nEmbd: 160,
  dropout: 0,
  dataset: "fashion-mnist",
  dataRoot: "",
  dataDir: "",
  outDir: "",
  bias: true,
  beta1: 0.9,
  beta2: 0.999,
  gradClip: 0,
  // nanoGPT's train.py defaults, for --dataset tokens.
  maxIters: 600000,
  evalInterval: 2000,
  evalIters: 200,
  logInterval: 1,
  evalOnly: false,
  alwaysSaveCheckpoint: true,
  initFrom: "scratch",
  gradientAccumulationSteps: 1,
  decayLr: true,
  warmupIters: 2000,
  lrDecayIters: 600000,
  minLr: 6e-5,
  snapshot: "runs/default/snapshot.safetensors",
  asyncSnapshots: false,
  seed: 0,
  threads: 0,
  maxSteps: 0,
  logEvery: 0,
  device: "cpu",
  dtype: "f32",
  strategy: "ddp",
  // The N-D layout (train/_layout.ts): torchtitan's parallelism degrees and defaults.
  tp: 1,
  // Pipeline parallelism (train/_pipeline.ts): microbatches 0 is one per pipeline rank.
  pp: 1,
  ppSchedule: "1f1b",
  microbatches: 0,
  dpShard: -1,
  dpReplicate: -1,
  sequenceParallel: true,
  lossParallel: true,
  ac: "none",
  acEvery: 2,
  profile: "",
  stragglerMs: 0,
  peakFlops: 0,
  ...LAUNCHER_DEFAULTS,
  nprocPerNode: 2,
};

/**
 * What `--model gpt` changes in the defaults: a byte-level GPT of about 1.3 M parameters on the
 * fortunes corpus with AdamW and a warmed-up cosine schedule, sized to finish one epoch in well
 * under 10 minutes on 2 processes × 1 core.
 */
export const GPT_DEFAULTS: Partial<TrainConfig> = {
  dataset: "text",
  optimizer: "adamw",
  lr: 3e-3,
  lrSchedule: "cosine",
  warmupSteps: 50,
  weightDecay: 0.1,
  batchSize: 16,
  epochs: 1,
  snapshot: "runs/gpt/snapshot.safetensors",
};

/**
 * What `--dataset tokens` changes in the defaults (on top of {@linkcode GPT_DEFAULTS}): nanoGPT's
 * train.py, iteration-based, with its optimizer (AdamW, lr 6e-4, betas 0.9/0.95, weight decay
 * 0.1, clipping at 1), no biases, seed 1337, its `out` folder and one process (as
 * `python train.py`; several with --nproc-per-node, as torchrun). The model's shape stays the
 * job's small one; a nanoGPT config file sets its own.
 */
export const TOKENS_DEFAULTS: Partial<TrainConfig> = {
  model: "gpt",
  optimizer: "adamw",
  lr: 6e-4,
  weightDecay: 0.1,
  beta2: 0.95,
  gradClip: 1,
  bias: false,
  batchSize: 12,
  seed: 1337,
  outDir: "out",
  nprocPerNode: 1,
};

/**
 * Where `--strategy fsdp` keeps its snapshot when `--snapshot` is not given: a sharded folder, in a
 * run folder of its own (a DDP snapshot is one file, and the two do not resume each other).
 */
export const FSDP_SNAPSHOTS = { gpt: "runs/gpt-fsdp/snapshot", other: "runs/fsdp/snapshot" };
