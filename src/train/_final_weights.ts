/** The trained model at the end of a run, whole, for the weights dump and the sample. @module */

import { dirname, join } from "node:path";
import { save } from "../checkpoint/mod.ts";
import type { Module, StateDict } from "../nn/module.ts";
import { GPT } from "../nn/gpt.ts";
import { fullStateDict } from "../parallel/fsdp/full_state_dict.ts";
import type { TrainConfig } from "./_schema.ts";
import { shardedSnapshots } from "./_layout.ts";
import { gatherTensorParallel } from "./_tp_weights.ts";

/** What of a trainer (epoch- or iteration-based) the end of a run reads. */
export interface Trained {
  config: TrainConfig;
  model: Module;
  rank: number;
  log(line: string): void;
}

/**
 * The trained model's whole state dict (gathered from every rank under FSDP or TP; every rank
 * calls this), and under FSDP or TP rank 0 writes it to model.safetensors beside the snapshot, with the
 * module's names, as PyTorch's `load_file` (and nanoGPT, for the GPT) reads it.
 */
export async function finalWeights(trainer: Trained): Promise<StateDict> {
  const { config } = trainer;
  if (!shardedSnapshots(config)) return trainer.model.stateDict();
  // FSDP's rows first (whole TP shards on every rank), then TP's shards (whole tensors).
  const local = config.strategy === "fsdp" ? await fullStateDict(trainer.model) : undefined;
  const weights = config.tp > 1 ? gatherTensorParallel(trainer.model, local) : local!;
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
  const model = new GPT((trainer.model as GPT).config);
  model.loadStateDict(weights);
  return model;
}
