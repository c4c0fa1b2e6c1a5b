/** The trained model at the end of a run, whole, for the weights dump and the sample. @module */

import { dirname, join } from "node:path";
import { loadSharded, save } from "../checkpoint/mod.ts";
import type { Module, StateDict } from "../nn/module.ts";
import { GPT } from "../nn/gpt.ts";
import { fullStateDict } from "../parallel/fsdp/full_state_dict.ts";
import type { TrainConfig } from "./_schema.ts";
import { shardedSnapshots } from "./_layout.ts";
import { buildModel, taskShape } from "./model.ts";

/** What of a trainer (epoch- or iteration-based) the end of a run reads. */
export interface Trained {
  config: TrainConfig;
  model: Module;
  rank: number;
  log(line: string): void;
}

/**
 * The trained model's whole state dict (gathered from every rank under FSDP, HSDP or TP by
 * `fullStateDict`; every rank calls this), and under FSDP or TP rank 0 writes it to model.safetensors beside the snapshot, with the
 * module's names, as PyTorch's `load_file` (and nanoGPT, for the GPT) reads it. A pipeline's
 * ranks hold their stages only: each reads the whole model back from the sharded snapshot the run
 * just committed (every run that trained ends with one, of its last step).
 */
export async function finalWeights(trainer: Trained): Promise<StateDict> {
  const { config } = trainer;
  if (!shardedSnapshots(config)) return trainer.model.stateDict();
  if (config.pp > 1) {
    const whole = buildModel(config, taskShape(config));
    loadSharded(config.snapshot, { model: whole });
    return saveWhole(trainer, whole.stateDict());
  }
  // Every dimension that shards a parameter: FSDP's rows (HSDP's replicas hold the same), TP's.
  return saveWhole(trainer, await fullStateDict(trainer.model));
}

/** Rank 0 writes `weights` to model.safetensors beside the snapshot; returns them. */
function saveWhole(trainer: Trained, weights: StateDict): StateDict {
  if (trainer.rank === 0) {
    const path = join(dirname(trainer.config.snapshot), "model.safetensors");
    save(path, weights, { format: "pt" });
    trainer.log(`model saved to ${path}`);
  }
  return weights;
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
