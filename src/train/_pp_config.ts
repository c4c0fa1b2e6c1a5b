/**
 * What `--pp`, `--pp-schedule` and `--microbatches` ask of the rest of the configuration, checked
 * before any process starts: a GPT split by whole blocks (torchtitan's `pipeline_module_split`),
 * batches that cut into equal microbatches, and the schedule's own bounds (PyTorch's).
 * @module
 */

import { ConfigError, type TrainConfig } from "./_schema.ts";

type PipelineFields = Pick<
  TrainConfig,
  | "pp"
  | "ppSchedule"
  | "microbatches"
  | "model"
  | "nLayer"
  | "batchSize"
  | "dataset"
  | "strategy"
  | "tp"
  | "dtype"
  | "sequenceParallel"
  | "lossParallel"
>;

/** Stages per pipeline rank: two under Interleaved 1F1B (torchtitan's default), else one. */
export function stagesPerRank(config: Pick<TrainConfig, "ppSchedule">): number {
  return config.ppSchedule === "interleaved" ? 2 : 1;
}

/** `--microbatches`, 0 resolved: one microbatch per pipeline rank. */
export function microbatchesOf(config: Pick<TrainConfig, "pp" | "microbatches">): number {
  return config.microbatches || config.pp;
}

/**
 * Refuses a pipeline the job cannot run, naming the flag.
 * @throws ConfigError for `--microbatches` without `--pp`, a model other than the GPT, settings
 *   the train job does not compose with a pipeline yet, layers or a batch the stages or
 *   microbatches do not divide, and a schedule's bound.
 */
export function checkPipelineFits(config: PipelineFields): void {
  const { pp, ppSchedule } = config;
  if (pp === 1) {
    if (config.microbatches !== 0) {
      throw new ConfigError("microbatches", `cuts a pipeline's batch: it needs --pp above 1`);
    }
    return;
  }
  if (config.model !== "gpt") {
    throw new ConfigError("pp", `pipeline stages split --model gpt only, got ${config.model}`);
  }
  const notYet = (field: string, what: string) =>
    new ConfigError(field, `${what} does not compose with --pp in the train job yet`);
  if (config.dataset === "tokens") throw notYet("dataset", "--dataset tokens (iterations)");
  if (config.dtype !== "f32") throw notYet("dtype", `--dtype ${config.dtype}`);
  // Stages pass whole activations, and the last one's loss reads whole logits.
  for (const field of ["sequenceParallel", "lossParallel"] as const) {
    if (config.tp > 1 && config[field]) {
      const flag = field === "sequenceParallel" ? "--sequence-parallel" : "--loss-parallel";
      throw notYet(field, `${flag} true (the default; give ${flag} false)`);
    }
  }
  const stages = pp * stagesPerRank(config);
  if (config.nLayer % stages !== 0) {
    const per = ppSchedule === "interleaved" ? ` (2 per rank under --pp-schedule interleaved)` : "";
    throw new ConfigError(
      "nLayer",
      `must be a multiple of the pipeline's ${stages} stages${per}, so that each holds as many ` +
        `blocks, got ${config.nLayer}`,
    );
  }
  const m = microbatchesOf(config);
  if (config.batchSize % m !== 0) {
    throw new ConfigError(
      "batchSize",
      `must be a multiple of the ${m} microbatches${
        config.microbatches ? "" : " (--microbatches defaults to --pp)"
      }, got ${config.batchSize}`,
    );
  }
  if (ppSchedule === "1f1b" && m < pp) {
    throw new ConfigError(
      "microbatches",
      `--pp-schedule 1f1b needs at least one microbatch per stage (${pp}), got ${m}`,
    );
  }
  if (ppSchedule === "interleaved" && m % pp !== 0) {
    throw new ConfigError(
      "microbatches",
      `--pp-schedule interleaved runs rounds of --pp (${pp}) microbatches: it must be a ` +
        `multiple of ${pp}, got ${m}`,
    );
  }
}
