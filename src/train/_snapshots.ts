/**
 * A job's snapshots, by strategy: DDP's one file, which rank 0 writes while the others wait, and
 * FSDP's sharded folder, to which every rank writes its shards (sharded_snapshot.ts).
 * @module
 */

import { existsSync } from "node:fs";
import { removeStaleTemporaries } from "../checkpoint/mod.ts";
import { barrier } from "../dist/mod.ts";
import type { Module } from "../nn/module.ts";
import type { Optimizer } from "../optim/optimizer.ts";
import { stateChecksum } from "./_stats.ts";
import { loadSnapshot, saveSnapshot, type SnapshotInfo } from "./snapshot.ts";
import {
  checkSnapshotKind,
  hasShardedSnapshot,
  loadShardedSnapshot,
  saveShardedSnapshot,
  type Strategy,
} from "./sharded_snapshot.ts";

/** Where a job's snapshot is, how it is written, and who this rank is. */
export interface SnapshotPlace {
  path: string;
  strategy: Strategy;
  rank: number;
  worldSize: number;
}

/**
 * Loads the snapshot at `place.path` into `model` and `optimizer` if there is one, and returns its
 * progress with a checksum of what was loaded (the model's, or the sharded index's), or null.
 * @throws CheckpointError for a snapshot of the other strategy, or one that does not fit.
 */
export function resumeSnapshot(
  place: SnapshotPlace,
  model: Module,
  optimizer: Optimizer<{ lr: number }>,
): (SnapshotInfo & { checksum: number }) | null {
  const { path, strategy, rank } = place;
  checkSnapshotKind(path, strategy);
  if (strategy === "fsdp") {
    // A sharded save clears a killed one's leftovers itself.
    if (!hasShardedSnapshot(path)) return null;
    const { fingerprint, ...info } = loadShardedSnapshot(path, model, optimizer);
    return { ...info, checksum: fingerprint };
  }
  // A job owns its snapshot path: what a killed predecessor left half-written goes.
  if (rank === 0) removeStaleTemporaries(path);
  if (!existsSync(path)) return null;
  const info = loadSnapshot(path, model, optimizer);
  return { ...info, checksum: stateChecksum(model) };
}

/** Writes a snapshot atomically; every rank calls it, and it returns once the snapshot is there. */
export async function writeSnapshot(
  place: SnapshotPlace,
  model: Module,
  optimizer: Optimizer<{ lr: number }>,
  info: SnapshotInfo,
): Promise<void> {
  const { path, strategy, rank, worldSize } = place;
  if (strategy === "fsdp") return await saveShardedSnapshot(path, model, optimizer, info);
  if (rank === 0) saveSnapshot(path, model, optimizer, info);
  // No rank runs ahead of the file.
  if (worldSize > 1) await barrier();
}
