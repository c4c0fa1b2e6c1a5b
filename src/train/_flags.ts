/** The train job's command-line flags: kebab-case names of the config fields. @module */

import { LAUNCHER_FLAGS } from "../launch/options.ts";
import type { TrainConfig } from "./_schema.ts";

/** Command-line flags: kebab-case names of the config fields, each a string until validated. */
export const FLAGS = {
  epochs: "epochs",
  "save-every": "saveEvery",
  "save-every-steps": "saveEverySteps",
  "batch-size": "batchSize",
  lr: "lr",
  momentum: "momentum",
  "weight-decay": "weightDecay",
  optimizer: "optimizer",
  "lr-schedule": "lrSchedule",
  "warmup-steps": "warmupSteps",
  model: "model",
  hidden: "hidden",
  "block-size": "blockSize",
  "n-layer": "nLayer",
  "n-head": "nHead",
  "n-embd": "nEmbd",
  dropout: "dropout",
  dataset: "dataset",
  "data-root": "dataRoot",
  "data-dir": "dataDir",
  "out-dir": "outDir",
  bias: "bias",
  beta1: "beta1",
  beta2: "beta2",
  "grad-clip": "gradClip",
  "max-iters": "maxIters",
  "eval-interval": "evalInterval",
  "eval-iters": "evalIters",
  "log-interval": "logInterval",
  "eval-only": "evalOnly",
  "always-save-checkpoint": "alwaysSaveCheckpoint",
  "init-from": "initFrom",
  "gradient-accumulation-steps": "gradientAccumulationSteps",
  "decay-lr": "decayLr",
  "warmup-iters": "warmupIters",
  "lr-decay-iters": "lrDecayIters",
  "min-lr": "minLr",
  snapshot: "snapshot",
  "async-snapshots": "asyncSnapshots",
  seed: "seed",
  threads: "threads",
  "max-steps": "maxSteps",
  "log-every": "logEvery",
  device: "device",
  dtype: "dtype",
  strategy: "strategy",
  tp: "tp",
  pp: "pp",
  "pp-schedule": "ppSchedule",
  microbatches: "microbatches",
  "dp-shard": "dpShard",
  "dp-replicate": "dpReplicate",
  "sequence-parallel": "sequenceParallel",
  "loss-parallel": "lossParallel",
  ac: "ac",
  "ac-every": "acEvery",
  profile: "profile",
  "straggler-ms": "stragglerMs",
  "peak-flops": "peakFlops",
  ...LAUNCHER_FLAGS,
} as const satisfies Record<string, keyof TrainConfig>;

/** Each field's flag, as the user types it. */
const FLAG_OF: ReadonlyMap<string, string> = new Map([
  ...Object.entries(FLAGS).map(([flag, field]) => [field, `--${flag}`] as const),
  // `--nnodes MIN:MAX` sets two fields.
  ["minNodes", "--nnodes"],
]);

/**
 * How the fields set by the last parsed config file are spelled there (`n_layer in c.py:3`).
 * [Note: errors name what the user typed] A field is named in an error as the user set it: the
 * flag, or the key of the config file it came from. Errors are raised far from the parser (the
 * layout's checks, the data's reader on each rank), so the parser leaves the file's spellings
 * here, once per parse, and {@linkcode ConfigError} reads them.
 */
let fileSpellings: ReadonlyMap<string, string> = new Map();

/** Records how the config file just read spells its fields; an empty map when there is none. */
export function setFileSpellings(spellings: ReadonlyMap<string, string>): void {
  fileSpellings = spellings;
}

/**
 * A config field as the user set it: the key of the config file that set it, else its flag
 * (`gradientAccumulationSteps` → `--gradient-accumulation-steps`); a dotted path (`hidden.1`)
 * keeps its tail, and names that are no field (`config`, `--snapshot`) are returned as they are.
 *
 * @example
 * ```ts
 * import { equal as assertEquals } from "node:assert/strict";
 * import { spelled } from "./_flags.ts";
 * assertEquals(spelled("gradientAccumulationSteps"), "--gradient-accumulation-steps");
 * assertEquals(spelled("hidden.1"), "--hidden item 1");
 * assertEquals(spelled("config"), "config");
 * ```
 */
export function spelled(field: string): string {
  // Already a phrase (`hidden.1 in c.json`): named where it was made.
  if (/\s/.test(field)) return field;
  const [head, ...tail] = field.split(".");
  const name = fileSpellings.get(head) ?? FLAG_OF.get(head);
  if (name === undefined) return field;
  return tail.length ? `${name} item ${tail.join(".")}` : name;
}
