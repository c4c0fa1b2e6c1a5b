/**
 * Sharded checkpoints, read: one JSON index says which box (N-D block) of which tensor each rank's
 * file holds, and a load onto any layout (any world size, TP, FSDP, HSDP, PP) reads the boxes that
 * meet each rank's own and copies the overlaps (see [Note: sharded checkpoint layout] in
 * _sharded_index.ts and [Note: boxes] in _boxes.ts). sharded_save.ts writes them.
 * @module
 */

import type { Module } from "../nn/module.ts";
import type { Optimizer, OptimizerStateDict, ParamState } from "../optim/optimizer.ts";
import { Tensor } from "../tensor/tensor.ts";
import { waitForBackgroundSaves } from "./_background_write.ts";
import { BoxReader } from "./_box_reader.ts";
import { boxShape, holding, wholeBox } from "./_boxes.ts";
import { type Index, readIndex } from "./_sharded_index.ts";
import { withHostBytes } from "../safetensors/safetensors.ts";
import { saveBytes, type TensorBytes } from "../safetensors/_writer.ts";

// deno-lint-ignore no-explicit-any
type AnyOptimizer = Optimizer<any>;

/** What `loadSharded` restores. */
export interface LoadShardedOptions {
  /** The model, built and sharded as for training (any world size). */
  model: Module;
  /** The optimizer over `model.parameters()`. */
  optimizer?: AnyOptimizer;
}

/** What a sharded checkpoint holds, as {@linkcode readShardedMetadata} reads it from the index. */
export interface ShardedMetadata {
  /** The number of ranks that saved it. */
  worldSize: number;
  /** Counts the saves into its folder. */
  generation: number;
  /** Every tensor's full shape: `model/<name>`, and `optim/<parameter>/<field>` for the optimizer. */
  tensors: Record<string, number[]>;
  /** The optimizer's parameter groups without their parameters (null when none was saved). */
  paramGroups: Record<string, unknown>[] | null;
  /** The `extra` values given to `saveSharded`. */
  extra: Record<string, unknown>;
}

/**
 * Reads what the sharded checkpoint in `dir` holds without loading a tensor: what a job checks
 * before it builds anything on a checkpoint. A background save to `dir` that this process has in
 * flight is waited for first.
 *
 * @param dir The checkpoint folder.
 * @returns Its metadata, or null when `dir` holds no checkpoint (no index: nothing was committed).
 * @throws CheckpointError naming the index when it is malformed.
 *
 * @example The shapes of a saved model
 * ```ts
 * import assert from "node:assert/strict";
 * import { checkpoint, nn } from "../../mod.ts";
 * const dir = Deno.makeTempDirSync();
 * assert.equal(checkpoint.readShardedMetadata(dir), null);
 * await checkpoint.saveSharded(dir, { model: new nn.Linear(3, 2), extra: { step: 7 } });
 * const meta = checkpoint.readShardedMetadata(dir)!;
 * assert.deepEqual(meta.tensors["model/weight"], [2, 3]);
 * assert.deepEqual([meta.worldSize, meta.extra.step], [1, 7]);
 * Deno.removeSync(dir, { recursive: true });
 * ```
 */
export function readShardedMetadata(dir: string): ShardedMetadata | null {
  waitForBackgroundSaves(dir);
  const index = readIndex(dir, false);
  if (index === null) return null;
  const { worldSize, generation, paramGroups, extra } = index;
  const tensors = Object.fromEntries(
    Object.entries(index.tensors).map(([name, { shape }]) => [name, shape]),
  );
  return { worldSize, generation, tensors, paramGroups, extra };
}

/**
 * Loads a checkpoint written by {@linkcode saveSharded} on any number of ranks into `model` (and
 * `optimizer`), each rank reading the rows it holds, straight into its tensors. Returns the saved
 * `extra`. A background save to `dir` that this process has in flight is waited for first.
 *
 * @param dir The checkpoint folder.
 * @param options See {@linkcode LoadShardedOptions}.
 * @returns The `extra` values given to `saveSharded`.
 * @throws CheckpointError naming the index or file that is missing, malformed or mismatched.
 */
export function loadSharded(dir: string, options: LoadShardedOptions): Record<string, unknown> {
  waitForBackgroundSaves(dir);
  const index = readIndex(dir, true)!;
  const reader = new BoxReader(dir, index);
  try {
    const named = [...options.model.namedParameters()];
    for (const [name, t] of Object.entries(options.model.stateDict())) {
      reader.read(`model/${name}`, t, holding(t));
    }
    if (options.optimizer) loadOptimizer(reader, index, named, options.optimizer);
  } finally {
    reader.dispose();
  }
  return index.extra;
}

/** Rebuilds the optimizer's state dict from this rank's rows and loads it. */
function loadOptimizer(
  reader: BoxReader,
  index: Index,
  named: [string, Tensor][],
  optimizer: AnyOptimizer,
): void {
  const fqnOf = new Map(named.map(([fqn, p]) => [p as Tensor, fqn]));
  const own = optimizer.stateDict();
  const state: Record<number, ParamState> = {};
  const made: Tensor[] = [];
  optimizer.paramGroups.flatMap((g) => g.params).forEach((p, i) => {
    const fqn = fqnOf.get(p);
    if (fqn === undefined) return;
    const prefix = `optim/${fqn}/`;
    const fields = Object.keys(index.tensors).filter((k) => k.startsWith(prefix));
    if (fields.length === 0 && index.scalars[fqn] === undefined) return;
    const s: ParamState = { ...index.scalars[fqn] };
    const held = holding(p);
    for (const key of fields) {
      const t = Tensor.empty(p.shape, "f32");
      made.push(t);
      reader.read(key, t, held);
      s[key.slice(prefix.length)] = t;
    }
    state[i] = s;
  });
  const saved = index.paramGroups ?? [];
  const dict: OptimizerStateDict<{ lr: number }> = {
    state,
    paramGroups: own.paramGroups.map((g, i) => ({ ...g, ...saved[i], params: g.params })),
  };
  try {
    optimizer.loadStateDict(dict);
  } finally {
    for (const t of made) t.dispose();
  }
}

/**
 * Writes the model of a sharded checkpoint as one safetensors file with its full tensors and
 * the module's names, as PyTorch's `load_file` (and nanoGPT, for `nn.GPT`) reads it. One full
 * tensor is held at a time, assembled from its pieces when the file reaches it.
 *
 * @param dir The checkpoint folder.
 * @param outFile The safetensors file to write (atomically).
 */
export function consolidate(dir: string, outFile: string): void {
  waitForBackgroundSaves(dir);
  const index = readIndex(dir, true)!;
  const reader = new BoxReader(dir, index);
  try {
    const sources = Object.entries(index.tensors)
      .filter(([name]) => name.startsWith("model/"))
      .map(([name, { shape }]): TensorBytes => ({
        name: name.slice("model/".length),
        dtype: "f32",
        shape,
        withBytes(write) {
          const t = Tensor.empty(shape, "f32");
          try {
            reader.read(name, t, { shape, localShape: boxShape(shape), boxes: [wholeBox(shape)] });
            withHostBytes(t, write);
          } finally {
            t.dispose();
          }
        },
      }));
    saveBytes(outFile, sources, { format: "pt" });
  } finally {
    reader.dispose();
  }
}
