/**
 * Training snapshots: everything a restarted job needs to continue exactly where the last one
 * stopped (model, optimizer buffers and step counts, epochs run, sampler and RNG state) in one
 * atomically written safetensors file. Tensors are stored under `model.<name>` and
 * `optimizer.<param index>.<field>`; everything else is JSON in the metadata.
 * @module
 */

import { dirname } from "node:path";
import { z } from "zod";
import { CheckpointError, readHeader, save } from "../checkpoint/mod.ts";
import type { TensorEntry } from "../safetensors/_header.ts";
import { TensorFile } from "../safetensors/_tensor_file.ts";
import { noGrad } from "../tensor/autograd.ts";
import { ownFolder } from "../io/private_files.ts";
import type { Module } from "../nn/module.ts";
import type { Optimizer, OptimizerStateDict, ParamState } from "../optim/optimizer.ts";
import {
  firstIssue,
  HyperparametersSchema,
  shown,
  StateScalarsSchema,
} from "../optim/hyperparameters.ts";
import { getRngState, setRngState } from "../tensor/random.ts";
import { formatShape, Tensor } from "../tensor/tensor.ts";

const count = z.number().int().nonnegative();
const decimal = z.string().regex(/^\d+$/, "expected a decimal integer string");

/** What every snapshot records of the run's progress, a file's and a sharded folder's alike. */
export const ProgressSchema = z.object({
  version: z.literal(1),
  epochsRun: count,
  /** Optimizer steps over the whole run (absent in snapshots from before it was recorded). */
  step: count.optional(),
  /** A position is recorded only mid-epoch: 1 or more samples of it consumed. */
  sampler: z.object({
    epoch: count,
    seed: count,
    position: z.number().int().positive().optional(),
  }).strict(),
  rng: z.object({ seed: decimal, offset: decimal }).strict(),
  /** Iteration-based runs: the best validation loss so far (nanoGPT's `best_val_loss`). */
  bestValLoss: z.number().optional(),
});

/** The schema of a snapshot's `dtrain` metadata (JSON): anything else is refused. */
export const SnapshotMetaSchema = ProgressSchema.extend({
  optimizer: z.object({
    paramGroups: z.array(HyperparametersSchema.extend({ params: z.array(count) })).min(1),
    scalars: z.record(decimal, StateScalarsSchema),
  }).strict(),
}).strict();

/** The names snapshot tensors may have: `model.<name>` or `optimizer.<index>.<field>`. */
const TENSOR_NAME = /^(model\.\S+|optimizer\.\d+\.[A-Za-z]\w*)$/;

/**
 * Reads a snapshot's metadata and checks it, and every tensor name, against the schema without
 * touching a model: what `deno task train` checks before it starts any process.
 *
 * @param path The snapshot file.
 * @returns The checked metadata.
 * @throws CheckpointError naming the file and the first bad field and value.
 */
export function checkSnapshot(path: string): z.infer<typeof SnapshotMetaSchema> {
  // The header alone: the tensors' bytes are not needed to check their names.
  const { tensors, metadata } = readHeader(path);
  return checkContents(path, Object.keys(tensors), metadata);
}

function checkContents(
  path: string,
  names: string[],
  metadata: Record<string, string>,
): z.infer<typeof SnapshotMetaSchema> {
  const bad = names.find((n) => !TENSOR_NAME.test(n));
  if (bad !== undefined) {
    throw new CheckpointError(
      path,
      `tensor ${JSON.stringify(bad)} is neither model.<name> nor optimizer.<index>.<field>`,
    );
  }
  if (metadata.dtrain === undefined) {
    throw new CheckpointError(path, `not a dtrain snapshot (no "dtrain" metadata)`);
  }
  let json: unknown;
  try {
    json = JSON.parse(metadata.dtrain);
  } catch (error) {
    throw new CheckpointError(
      path,
      `snapshot metadata "dtrain" is not valid JSON: ${(error as Error).message}`,
    );
  }
  return checkMetadata(path, json, SnapshotMetaSchema);
}

/**
 * Checks a snapshot's metadata against `schema`.
 * @throws CheckpointError naming `path`, the first bad field and the value seen.
 */
export function checkMetadata<S extends z.ZodType>(
  path: string,
  json: unknown,
  schema: S,
): z.infer<S> {
  const result = schema.safeParse(json);
  if (!result.success) {
    const issue = firstIssue(result.error, json);
    const field = issue.path.length ? issue.path.join(".") : "(the whole object)";
    throw new CheckpointError(
      path,
      `snapshot metadata field ${field}: ${issue.message} (got ${shown(issue.seen)})`,
    );
  }
  return result.data;
}

/** The progress a snapshot records beside the tensors. */
export interface SnapshotInfo {
  /** Epochs completed. */
  epochsRun: number;
  /** Optimizer steps over the whole run (absent in older snapshots). */
  step?: number;
  /** The sampler's state: epoch, seed, and for a snapshot taken mid-epoch the global position. */
  sampler: { epoch: number; seed: number; position?: number };
  /** Iteration-based runs (where `step` is nanoGPT's `iter_num`): the best validation loss. */
  bestValLoss?: number;
}

/**
 * Refuses a snapshot whose sampler state does not fit the data it resumes: a position at or beyond
 * the `samples` of an epoch, or a sampler epoch past the epochs run (it is the epoch in progress,
 * or for a snapshot at an epoch's end the one just finished).
 *
 * @param file The file that holds the progress (a DDP snapshot, or a sharded one's index).
 * @param info The progress it holds, checked against {@linkcode ProgressSchema}.
 * @param samples The training samples of one epoch.
 * @throws CheckpointError naming the file and the field.
 */
export function checkSamplerFits(file: string, info: SnapshotInfo, samples: number): void {
  const { epoch, position } = info.sampler;
  if (position !== undefined && position >= samples) {
    throw new CheckpointError(
      file,
      `snapshot metadata field sampler.position: ${position} samples of the epoch consumed, ` +
        `but an epoch of this data set has ${samples}`,
    );
  }
  if (epoch > info.epochsRun) {
    throw new CheckpointError(
      file,
      `snapshot metadata field sampler.epoch: the sampler is at epoch ${epoch}, past the ` +
        `${info.epochsRun} epochs run (epochsRun)`,
    );
  }
}

/**
 * Creates the folder of the snapshot at `snapshot` (where its record and logs go too), or checks
 * the one there: this user's (or root's, as /tmp), writable by no one else unless its sticky bit
 * protects our files, under folders no other user can rename ([Note: no writes through planted
 * links] in io/private_files.ts).
 *
 * @param snapshot The snapshot's path (`--snapshot`).
 * @throws UnsafePathError naming the folder, its owner and mode.
 */
export function ownRunFolder(snapshot: string): void {
  ownFolder(dirname(snapshot), {
    what: "run folder",
    fix: "remove it, or give --snapshot a path in a folder of your own",
    shared: true,
  });
}

/** Writes a snapshot atomically (the previous one stays intact until the rename). */
export function saveSnapshot(
  path: string,
  model: Module,
  optimizer: Optimizer<{ lr: number }>,
  info: SnapshotInfo,
): void {
  ownRunFolder(path);
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
      step: info.step,
      sampler: info.sampler,
      rng: getRngState(),
      ...(info.bestValLoss === undefined ? {} : { bestValLoss: info.bestValLoss }),
      optimizer: { paramGroups: optim.paramGroups, scalars },
    }),
  });
}

/**
 * Restores a snapshot into `model` and `optimizer` (and the global RNG); returns its progress.
 * The tensors are read from the file straight into the parameters and the optimizer's buffers,
 * one at a time, so that no second copy of the state is held (see `standIn`).
 * @throws CheckpointError naming the file and the field when it is not a valid dtrain snapshot
 *   or does not fit the model or optimizer.
 */
export function loadSnapshot(
  path: string,
  model: Module,
  optimizer: Optimizer<{ lr: number }>,
): SnapshotInfo {
  using file = TensorFile.open(path);
  const meta = checkContents(path, file.entries.map((e) => e.name), file.metadata);
  const standIns: Tensor[] = [];
  // The tensor each of the file's tensors is loaded into, or (for an optimizer buffer, which
  // loadStateDict allocates) one of the same shape: its parameter.
  const own = model.stateDict();
  const paramOf = new Map(
    optimizer.paramGroups.flatMap((g, i) =>
      g.params.map((p, j) => [meta.optimizer.paramGroups[i]?.params[j], p] as const)
    ),
  );
  try {
    const modelState: Record<string, Tensor> = {};
    const optimState: Record<number, ParamState> = {};
    for (const entry of file.entries) {
      if (entry.name.startsWith("model.")) {
        const name = entry.name.slice("model.".length);
        modelState[name] = standIn(entry, own[name], standIns);
      } else {
        const [, index, field] = entry.name.split(".");
        const t = standIn(entry, paramOf.get(Number(index)), standIns);
        (optimState[Number(index)] ??= {})[field] = t;
      }
    }
    for (const [index, fields] of Object.entries(meta.optimizer.scalars)) {
      Object.assign(optimState[Number(index)] ??= {}, fields);
    }
    try {
      model.loadStateDict(modelState);
    } catch (error) {
      throw new CheckpointError(path, `does not fit the model: ${(error as Error).message}`);
    }
    const dict = {
      state: optimState,
      paramGroups: meta.optimizer.paramGroups,
    } as OptimizerStateDict<{ lr: number }>;
    try {
      optimizer.loadStateDict(dict);
    } catch (error) {
      throw new CheckpointError(
        path,
        `does not fit the optimizer: ${(error as Error).message}`,
      );
    }
    for (const [name, t] of Object.entries(model.stateDict())) {
      readInto(file, file.entry(`model.${name}`)!, t);
    }
    const params = optimizer.paramGroups.flatMap((g, i) =>
      g.params.map((p, j) => [meta.optimizer.paramGroups[i].params[j], p] as const)
    );
    for (const [index, p] of params) {
      for (const [field, t] of Object.entries(optimizer.state.get(p) ?? {})) {
        if (typeof t !== "number") readInto(file, file.entry(`optimizer.${index}.${field}`)!, t);
      }
    }
    setRngState(meta.rng);
    const { epochsRun, step, sampler, bestValLoss } = meta;
    return { epochsRun, step, sampler, ...(bestValLoss === undefined ? {} : { bestValLoss }) };
  } finally {
    for (const t of standIns) t.dispose();
  }
}

/**
 * A stand-in for the file's tensor `entry` that holds no memory of its own: `like` (the tensor it
 * is loaded into, or one of its shape) when shape and dtype match, else one element expanded to
 * its shape. `loadStateDict` checks the model's and the optimizer's names, shapes and dtypes
 * against it with the messages it always gives, and fills the parameters and buffers from it; the
 * file's bytes are then read over them (`readInto`), one tensor at a time.
 */
function standIn(entry: TensorEntry, like: Tensor | undefined, made: Tensor[]): Tensor {
  const fits = like !== undefined && like.dtype === entry.dtype &&
    formatShape(like.shape) === formatShape(entry.shape);
  const base = fits ? like.detach() : Tensor.empty([], entry.dtype);
  made.push(base);
  if (fits) return base;
  const t = base.expand(...entry.shape);
  made.push(t);
  return t;
}

/** Reads `entry` of `file` into `t`: straight into its memory, or through a copy that converts. */
function readInto(file: TensorFile, entry: TensorEntry, t: Tensor): void {
  const nbytes = entry.end - entry.begin;
  if (t.dtype === entry.dtype && t.isContiguous() && t.storage.backend.isHostMemory) {
    if (nbytes > 0) file.readInto(entry, 0, t.ptr!, nbytes);
    return;
  }
  const read = Tensor.empty(entry.shape, entry.dtype);
  try {
    if (nbytes > 0) file.readInto(entry, 0, read.ptr!, nbytes);
    noGrad(() => t.copy_(read));
  } finally {
    read.dispose();
  }
}

/**
 * What differs between the snapshot at `path` and the model and optimizer this configuration
 * builds, or null when they fit: missing, unexpected and differently shaped tensors, each with
 * both shapes, or another optimizer (its hyperparameter names differ). What `deno task train`
 * checks before it starts any process, so that resuming with other flags is one message.
 *
 * @param path The snapshot file.
 * @param model A model built from the current configuration.
 * @param optimizer An optimizer built over it from the current configuration.
 */
export function snapshotMismatch(
  path: string,
  model: Module,
  optimizer: Optimizer<{ lr: number }>,
): string | null {
  const { tensors, metadata } = readHeader(path);
  const saved = new Map<string, readonly number[]>();
  for (const [name, { shape }] of Object.entries(tensors)) {
    if (name.startsWith("model.")) saved.set(name.slice("model.".length), shape);
  }
  // checkSnapshot has validated the metadata.
  return fitMismatch(saved, JSON.parse(metadata.dtrain).optimizer.paramGroups[0], model, optimizer);
}

/**
 * What differs between a snapshot's model tensors (`saved`, names to shapes) and optimizer
 * hyperparameters (`group`, its first parameter group) and the model and optimizer built here, or
 * null when they fit (see {@linkcode snapshotMismatch}).
 */
export function fitMismatch(
  saved: Map<string, readonly number[]>,
  group: Record<string, unknown>,
  model: Module,
  optimizer: Optimizer<{ lr: number }>,
): string | null {
  const left = new Map(saved);
  const shape = (s: readonly number[]) => `[${s.join(", ")}]`;
  const differences: string[] = [];
  for (const [name, t] of Object.entries(model.stateDict())) {
    const there = left.get(name);
    if (there === undefined) differences.push(`${name} ${shape(t.shape)} is not in the snapshot`);
    else if (shape(there) !== shape(t.shape)) {
      differences.push(`${name} is ${shape(there)} in the snapshot but ${shape(t.shape)} here`);
    }
    left.delete(name);
  }
  for (const [name, s] of left) {
    differences.push(`the snapshot has ${name} ${shape(s)}, this model not`);
  }
  if (differences.length > 0) {
    const shown = differences.slice(0, 4).join("; ") +
      (differences.length > 4 ? `; and ${differences.length - 4} more` : "");
    return `was saved from another model than this configuration builds ` +
      `(--model, --hidden, --dataset): ${shown}`;
  }
  // An optimizer is known by its hyperparameters.
  const hyper = (g: Record<string, unknown>) =>
    Object.keys(g).filter((k) => k !== "params").sort().join(", ");
  const theirs = hyper(group);
  const ours = hyper(optimizer.paramGroups[0]);
  return theirs === ours ? null : `was saved with another optimizer (hyperparameters ${theirs}) ` +
    `than --optimizer builds here (${ours})`;
}
