/**
 * Training snapshots: everything a restarted job needs to continue exactly where the last one
 * stopped (model, optimizer buffers and step counts, epochs run, sampler and RNG state) in one
 * atomically written safetensors file. Tensors are stored under `model.<name>` and
 * `optimizer.<param index>.<field>`; everything else is JSON in the metadata.
 * @module
 */

import { dirname } from "node:path";
import { load, save } from "../checkpoint/mod.ts";
import type { Module } from "../nn/module.ts";
import type { Optimizer, OptimizerStateDict, ParamState } from "../optim/optimizer.ts";
import { getRngState, setRngState } from "../tensor/random.ts";
import type { Tensor } from "../tensor/tensor.ts";

/** The progress a snapshot records beside the tensors. */
export interface SnapshotInfo {
  /** Epochs completed. */
  epochsRun: number;
  /** The sampler's state (epoch and seed). */
  sampler: { epoch: number; seed: number };
}

/** Writes a snapshot atomically (the previous one stays intact until the rename). */
export function saveSnapshot(
  path: string,
  model: Module,
  optimizer: Optimizer<{ lr: number }>,
  info: SnapshotInfo,
): void {
  Deno.mkdirSync(dirname(path), { recursive: true });
  const tensors: Record<string, Tensor> = {};
  for (const [name, t] of Object.entries(model.stateDict())) tensors[`model.${name}`] = t;
  const optim = optimizer.stateDict();
  const scalars: Record<string, Record<string, number>> = {};
  for (const [index, state] of Object.entries(optim.state)) {
    for (const [field, value] of Object.entries(state)) {
      if (typeof value === "number") (scalars[index] ??= {})[field] = value;
      else tensors[`optimizer.${index}.${field}`] = value;
    }
  }
  save(path, tensors, {
    format: "pt",
    dtrain: JSON.stringify({
      version: 1,
      epochsRun: info.epochsRun,
      sampler: info.sampler,
      rng: getRngState(),
      optimizer: { paramGroups: optim.paramGroups, scalars },
    }),
  });
}

/**
 * Restores a snapshot into `model` and `optimizer` (and the global RNG); returns its progress.
 * @throws Error naming the file when it is not a dtrain snapshot or does not fit the model.
 */
export function loadSnapshot(
  path: string,
  model: Module,
  optimizer: Optimizer<{ lr: number }>,
): SnapshotInfo {
  const { tensors, metadata } = load(path);
  try {
    if (!metadata.dtrain) {
      throw new Error(`${path} is not a dtrain snapshot (no "dtrain" metadata)`);
    }
    const meta = JSON.parse(metadata.dtrain);
    if (meta.version !== 1) {
      throw new Error(`${path}: unsupported snapshot version ${meta.version}`);
    }
    const modelState: Record<string, Tensor> = {};
    const optimState: Record<number, ParamState> = {};
    for (const [name, t] of Object.entries(tensors)) {
      if (name.startsWith("model.")) {
        modelState[name.slice("model.".length)] = t;
      } else {
        const [, index, field] = name.split(".");
        (optimState[Number(index)] ??= {})[field] = t;
      }
    }
    for (
      const [index, fields] of Object.entries(
        meta.optimizer.scalars as Record<string, Record<string, number>>,
      )
    ) {
      Object.assign(optimState[Number(index)] ??= {}, fields);
    }
    try {
      model.loadStateDict(modelState);
    } catch (error) {
      throw new Error(`${path} does not fit the model: ${(error as Error).message}`);
    }
    const dict: OptimizerStateDict<{ lr: number }> = {
      state: optimState,
      paramGroups: meta.optimizer.paramGroups,
    };
    optimizer.loadStateDict(dict);
    setRngState(meta.rng);
    return { epochsRun: meta.epochsRun, sampler: meta.sampler };
  } finally {
    for (const t of Object.values(tensors)) t.dispose();
  }
}
