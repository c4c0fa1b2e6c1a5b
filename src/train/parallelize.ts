/**
 * The job's parallelisms applied to the model built on every rank, in torchtitan's order
 * (`parallelize_llama`): tensor parallelism (the GPT plan, `parallelizeGPT`), then activation
 * checkpointing per block (`applyActivationCheckpointing`), then FSDP per block and the root on
 * the data-parallel mesh (`fullyShardModel`). DDP wraps the result later, in the trainers' init,
 * over the data-parallel group.
 * @module
 */

import { GPT } from "../nn/gpt.ts";
import type { Module } from "../nn/module.ts";
import { applyActivationCheckpointing } from "../parallel/activation_checkpoint.ts";
import type { FSDPModule } from "../parallel/fsdp/fully_shard.ts";
import { parallelizeGPT } from "../parallel/tensor_parallel/gpt_plan.ts";
import type { TrainConfig } from "./_schema.ts";
import { checkVocabFits, type Layout } from "./_layout.ts";
import { fullyShardModel } from "./model.ts";
import { fsdpPolicy } from "./precision.ts";

/**
 * Applies `--tp` (with `--sequence-parallel` and `--loss-parallel`), `--ac` and `--strategy fsdp`
 * to `model` (on its device, before the optimizer is made), in place.
 * @returns The fully sharded root, or null when the model is not fully sharded.
 * @throws ConfigError when `--tp` does not divide the vocabulary.
 */
export function parallelizeModel(
  config: TrainConfig,
  model: Module,
  layout: Layout,
): FSDPModule | null {
  if (layout.tpMesh !== null) {
    const gpt = model as GPT;
    checkVocabFits(layout.degrees.tp, gpt.config.vocabSize);
    parallelizeGPT(gpt, layout.tpMesh, {
      sequenceParallel: config.sequenceParallel,
      lossParallel: config.lossParallel,
    });
  }
  if (config.ac !== "none" && model instanceof GPT) {
    applyActivationCheckpointing(
      model,
      config.ac === "full" ? { mode: "full" } : { mode: "selective", every: config.acEvery },
    );
  }
  if (config.strategy !== "fsdp") return null;
  return fullyShardModel(model, fsdpPolicy(config), layout.fsdpMesh ?? undefined);
}
