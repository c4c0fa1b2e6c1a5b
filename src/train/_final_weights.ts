/** The trained model at the end of a run, whole, for the weights dump and the sample. @module */

import { dirname, join } from "node:path";
import { loadSharded } from "../checkpoint/mod.ts";
import type { Module, StateDict } from "../nn/module.ts";
import { GPT, type GPTConfig } from "../nn/gpt.ts";
import { fullStateDict } from "../parallel/fsdp/full_state_dict.ts";
import type { TrainConfig } from "./_schema.ts";
import { shardedSnapshots } from "./_layout.ts";
import { buildModel, taskShape } from "./model.ts";
import { saveModelFile } from "./model_file.ts";

/** What of a trainer (epoch- or iteration-based) the end of a run reads. */
export interface Trained {
  config: TrainConfig;
  model: Module;
  rank: number;
  log(line: string): void;
}

/**
 * The trained model's whole state dict (gathered from every rank under FSDP, HSDP or TP by
 * `fullStateDict`; every rank calls this). Rank 0 writes it to model.safetensors beside the
 * snapshot (model_file.ts: the module's names, a tied head once, a GPT's shape in the metadata),
 * as PyTorch's `load_file` (and nanoGPT, for the GPT) reads it and `deno task sample` samples
 * from it: under FSDP or TP, and for every GPT (whose snapshot alone does not say its shape). A
 * pipeline's ranks hold their stages only: each reads the whole model back from the sharded
 * snapshot the run just committed (every run that trained ends with one, of its last step).
 */
export async function finalWeights(trainer: Trained): Promise<StateDict> {
  const { config } = trainer;
  if (!shardedSnapshots(config)) {
    const weights = trainer.model.stateDict();
    return trainer.model instanceof GPT ? saveWhole(trainer, weights) : weights;
  }
  if (config.pp > 1) {
    const whole = buildModel(config, taskShape(config));
    loadSharded(config.snapshot, { model: whole });
    return saveWhole(trainer, whole.stateDict(), gptShape(whole));
  }
  // Every dimension that shards a parameter: FSDP's rows (HSDP's replicas hold the same), TP's.
  return saveWhole(trainer, await fullStateDict(trainer.model));
}

/**
 * Rank 0 writes `weights` (of a GPT of `shape`, if given) to model.safetensors beside the
 * snapshot; returns them.
 */
function saveWhole(
  trainer: Trained,
  weights: StateDict,
  shape = gptShape(trainer.model),
): StateDict {
  if (trainer.rank === 0) {
    const path = join(dirname(trainer.config.snapshot), "model.safetensors");
    const { config } = trainer;
    const data = config.dataset === "tokens"
      ? { dataDir: config.dataDir }
      : config.dataset === "text"
      ? { bytes: true as const }
      : undefined;
    saveModelFile(path, weights, shape, data);
    trainer.log(`model saved to ${path}`);
  }
  return weights;
}

/** A GPT's shape (a pipeline rank's stages have none: the caller passes the whole model's). */
function gptShape(model: Module): Readonly<GPTConfig> | undefined {
  return model instanceof GPT ? model.config : undefined;
}

/** A whole copy of a fully sharded or tensor-parallel GPT (of its whole shape), for rank 0 alone to sample from. */
export function wholeGPT(trainer: Trained, weights: StateDict): GPT {
  if (!shardedSnapshots(trainer.config)) return trainer.model as GPT;
  // A pipeline rank's module holds its stages: the whole shape comes from the config.
  const model = trainer.model instanceof GPT
    ? new GPT(trainer.model.config)
    : buildModel(trainer.config, taskShape(trainer.config)) as GPT;
  model.loadStateDict(weights);
  return model;
}
