/**
 * Sharded checkpoints: every rank saves the boxes (N-D blocks) of each full tensor it holds, under
 * tensor parallelism, FSDP, HSDP or TP + FSDP, with the AdamW state held as its parameter is; a box
 * several ranks hold (TP-replicated parameters, HSDP's replicas) is saved once. One JSON index says
 * which box of which tensor each file holds, and a load onto any layout reads the boxes that meet
 * each rank's own and copies the overlaps (see [Note: sharded checkpoint layout] in
 * _sharded_index.ts and [Note: boxes] in _boxes.ts).
 * @module
 */

import { barrier, isInitialized, type ProcessGroup, worldGroup } from "../distributed/mod.ts";
import type { Module } from "../nn/module.ts";
import type { Optimizer, OptimizerStateDict, ParamState } from "../optim/optimizer.ts";
import { Tensor } from "../tensor/tensor.ts";
import { BoxReader } from "./_box_reader.ts";
import { boxShape, extract, type Holding, holding, wholeBox } from "./_boxes.ts";
import {
  assignBoxes,
  buildIndex,
  commitIndex,
  type Index,
  mergeScalars,
  type Piece,
  readIndex,
  readRankPieces,
  writeRankPieces,
} from "./_sharded_index.ts";
import { save, saveBytes, type TensorBytes, withHostBytes } from "../safetensors/safetensors.ts";

// deno-lint-ignore no-explicit-any
type AnyOptimizer = Optimizer<any>;

/** What `saveSharded` writes. */
export interface SaveShardedOptions {
  /** The model: a `fullyShard` root, or any module (then rank 0 saves it whole). */
  model: Module;
  /** Its optimizer, whose per-parameter state is saved with the same rows as the parameters. */
  optimizer?: AnyOptimizer;
  /** JSON-serialisable values to keep with the checkpoint (step, data position). */
  extra?: Record<string, unknown>;
  /** The process group (default: the world, or this process alone before initProcessGroup). */
  group?: ProcessGroup;
}

/** What `loadSharded` restores. */
export interface LoadShardedOptions {
  /** The model, built and sharded as for training (any world size). */
  model: Module;
  /** The optimizer over `model.parameters()`. */
  optimizer?: AnyOptimizer;
}

/** The rank and size of `group`, or of this process alone. */
function whereAmI(
  group: ProcessGroup | undefined,
): { rank: number; size: number; sync(): Promise<void> } {
  const g = group ?? (isInitialized() ? worldGroup("saveSharded") : undefined);
  if (g === undefined) return { rank: 0, size: 1, sync: () => Promise.resolve() };
  return { rank: g.rank, size: g.size, sync: () => barrier(g).wait() };
}

/**
 * Saves `model` (and `optimizer`) into `dir` as one safetensors file per rank plus `index.json`,
 * committed atomically. Every rank of the group calls it; `dir` must be one folder that every rank
 * sees (the same machine, or a shared file system).
 *
 * @param dir The checkpoint folder (created if missing; a previous checkpoint there is replaced).
 * @param options See {@linkcode SaveShardedOptions}.
 *
 * @example Save and load in one process
 * ```ts
 * import assert from "node:assert/strict";
 * import { checkpoint, nn } from "../../mod.ts";
 * const dir = Deno.makeTempDirSync();
 * const model = new nn.Linear(3, 2);
 * await checkpoint.saveSharded(dir, { model, extra: { step: 7 } });
 * const copy = new nn.Linear(3, 2);
 * const extra = checkpoint.loadSharded(dir, { model: copy });
 * assert.deepEqual(copy.weight.toArray(), model.weight.toArray());
 * assert.equal(extra.step, 7);
 * Deno.removeSync(dir, { recursive: true });
 * ```
 */
export async function saveSharded(dir: string, options: SaveShardedOptions): Promise<void> {
  const { rank, size, sync } = whereAmI(options.group);
  const previous = readIndex(dir, false);
  const generation = (previous?.generation ?? 0) + 1;
  const folder = `${dir}/gen-${generation}`;
  // A save killed before its commit may have left this folder, with files of ranks this save
  // lacks and half-written temporaries: no index names it, so it starts again empty.
  if (rank === 0) removeIfThere(folder);
  await sync(); // everyone has read the previous generation before rank 0 can replace it
  Deno.mkdirSync(folder, { recursive: true });
  // Every state-dict name, tied parameters under each of their names (as nanoGPT's files have);
  // optimizer state held as its parameter is.
  const held = new Map<string, { t: Tensor; held: Holding }>();
  const namesOf = new Map<Tensor, string[]>();
  for (const [name, t] of Object.entries(options.model.stateDict())) {
    held.set(`model/${name}`, { t, held: holding(t) });
    namesOf.set(t, [...(namesOf.get(t) ?? []), name]);
  }
  // A tied parameter's optimizer state goes under each of its names too, so that a layout
  // holding only one of them (a pipeline's last stage: lm_head without wte) finds its own.
  const scalars: Record<string, Record<string, number>> = {};
  for (const [fqn, p] of options.model.namedParameters()) {
    for (const name of namesOf.get(p) ?? [fqn]) {
      for (const [field, v] of Object.entries(options.optimizer?.state.get(p) ?? {})) {
        if (typeof v === "number") (scalars[name] ??= {})[field] = v;
        else held.set(`optim/${name}/${field}`, { t: v, held: holding(p) });
      }
    }
  }
  const pieces: Record<string, Piece> = {};
  for (const [name, { held: h }] of held) {
    if (h.boxes.length === 0) continue; // an FSDP rank past the last row
    pieces[name] = {
      shape: h.shape,
      boxes: h.boxes.map(({ start, length }) => ({ start, length })),
    };
  }
  const groups = options.optimizer?.stateDict().paramGroups.map(({ params: _, ...h }) => h);
  // A save that fails (a full disk, a rank gone) takes its piece list back: only a committed
  // save leaves files, so the folder shows the previous generation alone.
  const pieceList = `${folder}/rank-${rank}.json`;
  let ranks: ReturnType<typeof readRankPieces>;
  let merged: ReturnType<typeof mergeScalars>;
  try {
    writeRankPieces(pieceList, { pieces, scalars, paramGroups: groups ?? null });
    await sync(); // every rank's piece list is there: each can tell which of its boxes it writes
    ranks = readRankPieces(dir, generation, size);
    try {
      merged = mergeScalars(dir, ranks);
    } catch (err) {
      // Every rank reads the same lists, so all refuse a disagreement alike; once all have read
      // (taking a list back before then would fail a slower rank's read instead).
      await sync();
      throw err;
    }
    saveBytes(`${folder}/rank-${rank}.safetensors`, myBoxes(held, ranks, rank, folder));
  } catch (err) {
    removeIfThere(pieceList);
    throw err;
  }
  await sync();
  if (rank === 0) {
    commitIndex(dir, buildIndex(dir, generation, ranks, merged, options.extra ?? {}));
  }
  await sync();
}

/**
 * The boxes this rank writes (those no lower rank holds, see `assignBoxes`), each taken from its
 * tensor only when the file reaches it: a box that is contiguous in the local tensor (a whole
 * tensor, an FSDP row range) is written from the tensor's own memory, any other is copied out
 * alone and freed once written, so a save never holds a second copy of the state.
 */
function myBoxes(
  held: Map<string, { t: Tensor; held: Holding }>,
  ranks: ReturnType<typeof readRankPieces>,
  rank: number,
  folder: string,
): TensorBytes[] {
  const mine: TensorBytes[] = [];
  for (const [name, { pieces }] of Object.entries(assignBoxes(ranks, folder))) {
    const { t, held: h } = held.get(name) ?? {};
    for (const piece of pieces) {
      if (piece.file !== rank) continue;
      const box = h!.boxes.find((b) =>
        b.start.join() === piece.start.join() && b.length.join() === piece.length.join()
      )!;
      mine.push({
        name: piece.key,
        dtype: t!.dtype,
        shape: box.length,
        withBytes(write) {
          const part = extract(t!, h!.localShape, box);
          try {
            withHostBytes(part, write);
          } finally {
            part.dispose();
          }
        },
      });
    }
  }
  return mine;
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
 * before it builds anything on a checkpoint.
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
  const index = readIndex(dir, false);
  if (index === null) return null;
  const { worldSize, generation, paramGroups, extra } = index;
  const tensors = Object.fromEntries(
    Object.entries(index.tensors).map(([name, { shape }]) => [name, shape]),
  );
  return { worldSize, generation, tensors, paramGroups, extra };
}

/** Removes `path` and what is under it, if it exists. */
function removeIfThere(path: string): void {
  try {
    Deno.removeSync(path, { recursive: true });
  } catch (err) {
    if (!(err instanceof Deno.errors.NotFound)) throw err;
  }
}

/**
 * Loads a checkpoint written by {@linkcode saveSharded} on any number of ranks into `model` (and
 * `optimizer`), each rank reading the rows it holds. Returns the saved `extra`.
 *
 * @param dir The checkpoint folder.
 * @param options See {@linkcode LoadShardedOptions}.
 * @returns The `extra` values given to `saveSharded`.
 * @throws CheckpointError naming the index or file that is missing, malformed or mismatched.
 */
export function loadSharded(dir: string, options: LoadShardedOptions): Record<string, unknown> {
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
 * the module's names, as PyTorch's `load_file` (and nanoGPT, for `nn.GPT`) reads it.
 *
 * @param dir The checkpoint folder.
 * @param outFile The safetensors file to write (atomically).
 */
export function consolidate(dir: string, outFile: string): void {
  const index = readIndex(dir, true)!;
  const reader = new BoxReader(dir, index);
  const full: Record<string, Tensor> = {};
  try {
    for (const [name, { shape }] of Object.entries(index.tensors)) {
      if (!name.startsWith("model/")) continue;
      const t = Tensor.empty(shape, "f32");
      full[name.slice("model/".length)] = t;
      reader.read(name, t, { shape, localShape: boxShape(shape), boxes: [wholeBox(shape)] });
    }
    save(outFile, full, { format: "pt" });
  } finally {
    reader.dispose();
    for (const t of Object.values(full)) t.dispose();
  }
}
