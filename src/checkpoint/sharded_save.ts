/**
 * Saving sharded checkpoints: every rank writes the boxes (N-D blocks) of each full tensor it
 * holds, under tensor parallelism, FSDP, HSDP or TP + FSDP, with the AdamW state held as its
 * parameter is; a box several ranks hold (TP-replicated parameters, HSDP's replicas) is saved
 * once. Synchronously, or in the background (see [Note: sharded checkpoint layout] in
 * _sharded_index.ts and [Note: asynchronous sharded saves] in _background_write.ts).
 * @module
 */

import { resolve } from "node:path";
import { barrier, isInitialized, type ProcessGroup, worldGroup } from "../distributed/mod.ts";
import type { Module } from "../nn/module.ts";
import type { Optimizer } from "../optim/optimizer.ts";
import { type DType, itemSize } from "../tensor/dtype.ts";
import type { Tensor } from "../tensor/tensor.ts";
import { withHostBytes } from "../safetensors/safetensors.ts";
import { saveBytes } from "../safetensors/_writer.ts";
import { stagingBuffer, writeInBackground } from "./_background_write.ts";
import { extract, type Holding, holding } from "./_boxes.ts";
import {
  assignBoxes,
  buildIndex,
  commitIndex,
  mergeScalars,
  type Piece,
  readIndex,
  readRankPieces,
  writeRankPieces,
} from "./_sharded_index.ts";

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
  /**
   * Write in the background (PyTorch's `dcp.async_save`): once every rank has staged a copy of
   * what it writes, `saveSharded` returns a {@linkcode PendingSave} and training may change the
   * model at once (see [Note: asynchronous sharded saves] in _background_write.ts). The staging
   * buffers hold this rank's share of the state again, and are kept for the next background save.
   */
  async?: boolean;
  /**
   * How long a background save waits for the other ranks' files (rank 0) or commit (the others)
   * once its own file is written, in milliseconds (default 10 minutes).
   */
  timeoutMs?: number;
}

/** A background save in flight: what `saveSharded(…, { async: true })` returns (DCP's Future). */
export interface PendingSave {
  /** The generation it commits (`gen-N/`, and the index's `generation`). */
  generation: number;
  /**
   * Settles once the save is committed: on rank 0 when its index is in place, on the others
   * when they have seen it. Rejects with the error of whichever rank's write failed; await it (a
   * failure nothing awaits ends the process, as any unhandled rejection does).
   */
  done: Promise<void>;
}

/** Background saves in flight, by folder: the next save to a folder waits for its last one. */
const inFlight = new Map<string, Promise<void>>();

/** What `loadSharded` restores. */
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
export async function saveSharded(
  dir: string,
  options: SaveShardedOptions & { async?: false },
): Promise<void>;
/**
 * Saves as above, in the background (PyTorch's `dcp.async_save`): returns once this rank has
 * staged what it writes, with the save in flight; its `done` settles when it is committed.
 *
 * @param dir The checkpoint folder.
 * @param options See {@linkcode SaveShardedOptions}, with `async: true`.
 * @returns The save in flight.
 *
 * @example Train on while the checkpoint is written
 * ```ts
 * import assert from "node:assert/strict";
 * import { checkpoint, nn, noGrad } from "../../mod.ts";
 * const dir = Deno.makeTempDirSync();
 * const model = new nn.Linear(3, 2);
 * const before = model.weight.toArray();
 * const pending = await checkpoint.saveSharded(dir, { model, async: true });
 * noGrad(() => model.weight.fill_(0)); // what was staged is what is saved
 * await pending.done;
 * const copy = new nn.Linear(3, 2);
 * checkpoint.loadSharded(dir, { model: copy });
 * assert.deepEqual(copy.weight.toArray(), before);
 * Deno.removeSync(dir, { recursive: true });
 * ```
 */
export async function saveSharded(
  dir: string,
  options: SaveShardedOptions & { async: true },
): Promise<PendingSave>;
export async function saveSharded(
  dir: string,
  options: SaveShardedOptions,
): Promise<PendingSave | void> {
  // Its failure is the error of its own promise; this save only needs it settled.
  await inFlight.get(resolve(dir))?.catch(() => {});
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
    const boxes = myBoxes(held, ranks, rank, folder);
    if (options.async) {
      const index = rank === 0
        ? buildIndex(dir, generation, ranks, merged, options.extra ?? {})
        : null;
      const timeoutMs = options.timeoutMs ?? 10 * 60_000;
      const job = { dir, generation, rank, worldSize: size, index, timeoutMs };
      const key = resolve(dir);
      const done = writeInBackground(job, stage(boxes));
      inFlight.set(key, done);
      done.catch(() => {}).finally(() => inFlight.get(key) === done && inFlight.delete(key));
      return { generation, done };
    }
    saveBytes(
      `${folder}/rank-${rank}.safetensors`,
      boxes.map(({ name, part }) => ({
        name,
        dtype: part.dtype,
        shape: part.shape,
        withBytes(write) {
          const t = part.take();
          try {
            withHostBytes(t, write);
          } finally {
            t.dispose();
          }
        },
      })),
    );
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
 * Copies the bytes of each of `boxes` into memory of its own for a background write: plain
 * ArrayBuffers (from the staging pool of _background_write.ts) rather than tensors, whose
 * allocator would hand over the buffers it keeps for the next step's gradients (of the same
 * sizes), and that step would fault in fresh pages instead.
 */
function stage(
  boxes: { name: string; part: BoxPart }[],
): { name: string; dtype: DType; shape: number[]; bytes: Uint8Array }[] {
  return boxes.map(({ name, part }) => {
    const t = part.take();
    try {
      const bytes = stagingBuffer(t.numel() * itemSize(t.dtype));
      withHostBytes(t, (ptr) => {
        if (ptr === null) return;
        bytes.set(new Uint8Array(Deno.UnsafePointerView.getArrayBuffer(ptr, bytes.length)));
      });
      return { name, dtype: part.dtype, shape: part.shape, bytes };
    } finally {
      t.dispose();
    }
  });
}

/** A box this rank writes: its dtype and shape, and `take()` to get it (dispose it after). */
interface BoxPart {
  dtype: DType;
  shape: number[];
  take(): Tensor;
}

/**
 * The boxes this rank writes (those no lower rank holds, see `assignBoxes`), each taken from its
 * tensor only when needed: a box that is contiguous in the local tensor (a whole tensor, an FSDP
 * row range) is a view of the tensor's own memory, any other a copy of that box alone, so a save
 * never holds a second copy of the state.
 */
function myBoxes(
  held: Map<string, { t: Tensor; held: Holding }>,
  ranks: ReturnType<typeof readRankPieces>,
  rank: number,
  folder: string,
): { name: string; part: BoxPart }[] {
  const mine: { name: string; part: BoxPart }[] = [];
  for (const [name, { pieces }] of Object.entries(assignBoxes(ranks, folder))) {
    const { t, held: h } = held.get(name) ?? {};
    for (const piece of pieces) {
      if (piece.file !== rank) continue;
      const box = h!.boxes.find((b) =>
        b.start.join() === piece.start.join() && b.length.join() === piece.length.join()
      )!;
      const part = {
        dtype: t!.dtype,
        shape: box.length,
        take: () => extract(t!, h!.localShape, box),
      };
      mine.push({ name: piece.key, part });
    }
  }
  return mine;
}

/** Removes `path` and what is under it, if it exists. */
function removeIfThere(path: string): void {
  try {
    Deno.removeSync(path, { recursive: true });
  } catch (err) {
    if (!(err instanceof Deno.errors.NotFound)) throw err;
  }
}
