/**
 * `--strategy fsdp`'s snapshots: a sharded checkpoint folder (`checkpoint.saveSharded`: every
 * rank's rows of the model and of the optimizer state, one index, committed atomically) whose
 * `extra` holds what a DDP snapshot keeps in its metadata: epochs and steps run, where the sampler
 * is, the RNG. It loads on any number of ranks, resharded. A DDP snapshot is one file and an FSDP
 * one a folder; each strategy refuses the other's by name.
 * @module
 */

import { join } from "node:path";
import { z } from "zod";
import {
  CheckpointError,
  loadSharded,
  type PendingSave,
  readShardedMetadata,
  saveSharded,
  type ShardedMetadata,
} from "../checkpoint/mod.ts";
import { ownFolder } from "../io/private_files.ts";
import type { Module } from "../nn/module.ts";
import type { Optimizer } from "../optim/optimizer.ts";
import { getRngState, setRngState } from "../tensor/random.ts";
import { fnv1a } from "./_stats.ts";
import { checkMetadata, fitMismatch, ProgressSchema, type SnapshotInfo } from "./snapshot.ts";

/** The schema of a sharded snapshot's `extra` (JSON): anything else is refused. */
export const ShardedProgressSchema = ProgressSchema.extend({
  strategy: z.literal("fsdp"),
  step: z.number().int().nonnegative(),
}).strict();

/** The training strategies, whose snapshots differ. */
export type Strategy = "ddp" | "fsdp";

/**
 * Refuses a snapshot of the other strategy at `path`: a file (DDP's) for `fsdp`, a folder for
 * `ddp`. Nothing there is fine.
 * @throws CheckpointError naming the path, what it holds and the strategy of this run.
 */
export function checkSnapshotKind(path: string, strategy: Strategy): void {
  let info: Deno.FileInfo;
  try {
    info = Deno.statSync(path);
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return;
    throw error;
  }
  const retry = `, or give --snapshot another path`;
  if (strategy === "fsdp" && !info.isDirectory) {
    throw new CheckpointError(
      path,
      `is a file, a --strategy ddp snapshot, but this run is --strategy fsdp, whose snapshot ` +
        `is a sharded folder: resume it with --strategy ddp${retry}`,
    );
  }
  if (strategy === "ddp" && info.isDirectory) {
    throw new CheckpointError(
      path,
      readShardedMetadata(path) === null
        ? `is a folder, but a --strategy ddp snapshot is one file: give --snapshot a file path`
        : `is a sharded folder, a --strategy fsdp snapshot, but this run is --strategy ddp, ` +
          `whose snapshot is one file: resume it with --strategy fsdp${retry}`,
    );
  }
}

/** Whether `path` holds a committed sharded snapshot (a folder a first save died in does not). */
export function hasShardedSnapshot(path: string): boolean {
  checkSnapshotKind(path, "fsdp");
  try {
    return readShardedMetadata(path) !== null;
  } catch (error) {
    if (error instanceof CheckpointError) return true; // there, and refused when loaded
    throw error;
  }
}

/**
 * Reads the sharded snapshot at `path` and checks its progress record, without loading a tensor.
 * @throws CheckpointError naming the index and the first bad field.
 */
export function checkShardedSnapshot(
  path: string,
): { meta: ShardedMetadata; progress: z.infer<typeof ShardedProgressSchema> } {
  checkSnapshotKind(path, "fsdp");
  const meta = readShardedMetadata(path);
  if (meta === null) throw new CheckpointError(path, "holds no sharded snapshot (no index.json)");
  return {
    meta,
    progress: checkMetadata(join(path, "index.json"), meta.extra, ShardedProgressSchema),
  };
}

/**
 * Writes a sharded snapshot of the fully sharded `model` and its optimizer to the folder `path`;
 * every rank calls it. It returns when the snapshot is committed, or, `inBackground`, once the
 * state is staged, with the save in flight (`checkpoint.saveSharded`'s `async`).
 */
export async function saveShardedSnapshot(
  path: string,
  model: Module,
  optimizer: Optimizer<{ lr: number }>,
  info: SnapshotInfo,
  inBackground = false,
): Promise<PendingSave | void> {
  // Every rank writes in it, so no other user may (io/private_files.ts); the folders above it
  // may be shared, as /tmp, but not renamed by another user.
  ownFolder(path, {
    what: "snapshot folder",
    fix: "remove it, or give --snapshot a path in a folder of your own",
  });
  const extra = { version: 1, strategy: "fsdp", ...info, rng: getRngState() };
  if (inBackground) return await saveSharded(path, { model, optimizer, extra, async: true });
  await saveSharded(path, { model, optimizer, extra });
}

/**
 * Restores the sharded snapshot at `path` into the fully sharded `model` and its optimizer (and the
 * global RNG), on this world size whatever it was saved on. Returns its progress and a fingerprint
 * of what was loaded, equal on ranks that loaded the same snapshot.
 * @throws CheckpointError naming the index or file that is malformed or does not fit.
 */
export function loadShardedSnapshot(
  path: string,
  model: Module,
  optimizer: Optimizer<{ lr: number }>,
): SnapshotInfo & { fingerprint: number } {
  const { meta, progress } = checkShardedSnapshot(path);
  loadSharded(path, { model, optimizer });
  setRngState(progress.rng);
  const fingerprint = fnv1a(new TextEncoder().encode(JSON.stringify(meta))) | 0;
  return {
    epochsRun: progress.epochsRun,
    step: progress.step,
    sampler: progress.sampler,
    ...(progress.bestValLoss === undefined ? {} : { bestValLoss: progress.bestValLoss }),
    fingerprint,
  };
}

/**
 * What differs between the sharded snapshot at `path` and the (whole) model and optimizer this
 * configuration builds, or null when they fit; see `snapshotMismatch` for a file's.
 */
export function shardedSnapshotMismatch(
  path: string,
  model: Module,
  optimizer: Optimizer<{ lr: number }>,
): string | null {
  const { meta } = checkShardedSnapshot(path);
  const saved = new Map<string, readonly number[]>();
  for (const [name, shape] of Object.entries(meta.tensors)) {
    if (name.startsWith("model/")) saved.set(name.slice("model/".length), shape);
  }
  return fitMismatch(saved, meta.paramGroups?.[0] ?? {}, model, optimizer);
}
