/**
 * This rank's training batches: the sampler over the training set, keyed by the data-parallel rank
 * (the ranks of one TP group or pipeline read the same samples), and the loader that yields them
 * on the process's device, through page-locked memory when its family's record says so.
 * @module
 */

import { DataLoader } from "../data/dataloader.ts";
import { DistributedSampler } from "../data/distributed_sampler.ts";
import { FAMILIES } from "../tensor/device/mod.ts";
import type { Device } from "../tensor/storage.ts";
import type { TrainConfig } from "./_schema.ts";
import type { Layout } from "./_layout.ts";
import type { Task } from "./model.ts";

/**
 * The sampler and loader of `task`'s training set for this rank.
 *
 * @param config The job's configuration (batch size, seed, `--device`).
 * @param task The task whose training set is read.
 * @param layout This rank's place among the data-parallel ranks.
 * @param device Where batches arrive (the process's device of `config.device`).
 * @returns The sampler (whose state a snapshot keeps) and the loader over it.
 */
export function trainBatches(
  config: TrainConfig,
  task: Task,
  layout: Layout,
  device: Device,
): { sampler: DistributedSampler; loader: DataLoader } {
  const sampler = new DistributedSampler(task.train, {
    numReplicas: layout.dpSize,
    rank: layout.dpRank,
    shuffle: true,
    seed: config.seed,
  });
  // Pinned, batches arrive through page-locked memory, copied while the step before runs.
  const loader = new DataLoader(task.train, {
    batchSize: config.batchSize,
    sampler,
    pinMemory: FAMILIES[config.device].pinsBatches,
    device,
  });
  return { sampler, loader };
}
