/**
 * A job's snapshots, by strategy: DDP's one file, which rank 0 writes while the others wait, and
 * FSDP's sharded folder, to which every rank writes its shards (sharded_snapshot.ts).
 * @module
 */

import { existsSync } from "node:fs";
import { join } from "node:path";
import { CheckpointError } from "../checkpoint/mod.ts";
import { removeStaleTemporaries } from "../io/private_files.ts";
import { barrier } from "../distributed/mod.ts";
import type { Module } from "../nn/module.ts";
import type { Optimizer } from "../optim/optimizer.ts";
import { stateChecksum } from "./_stats.ts";
import { checkFiniteBeforeSave, firstNonFinite } from "./_finite.ts";
import { checkSamplerFits, loadSnapshot, saveSnapshot, type SnapshotInfo } from "./snapshot.ts";
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
  /** `--async-snapshots`: a sharded snapshot is written in the background. */
  inBackground?: boolean;
}

/**
 * The job's background snapshot in flight (at most one: the next waits for it), and the error
 * it failed with, which the next snapshot throws. A process that exits waits for it
 * (checkpoint/_background_write.ts).
 */
let background: { path: string; done: Promise<void>; error?: unknown } | null = null;

/** Waits for the background snapshot in flight; throws its failure as a CheckpointError. */
async function backgroundSettled(): Promise<void> {
  const last = background;
  if (last === null) return;
  await last.done;
  background = null;
  if ("error" in last) {
    throw new CheckpointError(
      last.path,
      `the background snapshot failed (${(last.error as Error).message}); the snapshot ` +
        `before it is intact`,
      { cause: last.error },
    );
  }
}

/** The file that holds a snapshot's progress: DDP's one file, or a sharded folder's index. */
export function progressFile(path: string, strategy: Strategy): string {
  return strategy === "fsdp" ? join(path, "index.json") : path;
}

/**
 * Loads the snapshot at `place.path` into `model` and `optimizer` if there is one, and returns its
 * progress with a checksum of what was loaded (the model's, or the sharded index's), or null.
 *
 * @param samples The training samples of one epoch, which the sampler's position must be within.
 * @throws CheckpointError for a snapshot of the other strategy, one that does not fit, one whose
 *   sampler state lies outside the data, or one holding NaN or infinity (this rank's part of it).
 */
export function resumeSnapshot(
  place: SnapshotPlace,
  model: Module,
  optimizer: Optimizer<{ lr: number }>,
  samples: number,
): (SnapshotInfo & { checksum: number }) | null {
  const { path, strategy, rank } = place;
  checkSnapshotKind(path, strategy);
  let loaded: (SnapshotInfo & { checksum: number }) | null = null;
  if (strategy === "fsdp") {
    // A sharded save clears a killed one's leftovers itself.
    if (hasShardedSnapshot(path)) {
      const { fingerprint, ...info } = loadShardedSnapshot(path, model, optimizer);
      loaded = { ...info, checksum: fingerprint };
    }
  } else {
    // A job owns its snapshot path: what a killed predecessor left half-written goes.
    if (rank === 0) removeStaleTemporaries(path);
    if (existsSync(path)) {
      const info = loadSnapshot(path, model, optimizer);
      loaded = { ...info, checksum: stateChecksum(model) };
    }
  }
  if (loaded === null) return null;
  checkSamplerFits(progressFile(path, strategy), loaded, samples);
  const bad = firstNonFinite(model, optimizer);
  if (bad !== null) throw new CheckpointError(path, `${bad} holds NaN or infinity`);
  return loaded;
}

/**
 * Writes a snapshot atomically; every rank calls it, and it returns once the snapshot is there,
 * or, with `place.inBackground`, once the state is staged and its write in flight (after the
 * previous one's, whose failure it throws).
 * @throws DivergedError on every rank, writing nothing, when the state holds NaN or infinity.
 * @throws CheckpointError naming the snapshot when the file system refuses the write (a full
 *   disk, no permission); the previous snapshot stays as it was.
 */
export async function writeSnapshot(
  place: SnapshotPlace,
  model: Module,
  optimizer: Optimizer<{ lr: number }>,
  info: SnapshotInfo,
): Promise<void> {
  const { path, strategy, rank, worldSize } = place;
  const sharded = strategy === "fsdp";
  await checkFiniteBeforeSave(path, info.step ?? 0, model, optimizer, sharded, worldSize);
  try {
    await backgroundSettled();
    if (strategy === "fsdp" && place.inBackground) {
      const pending = await saveShardedSnapshot(path, model, optimizer, info, true);
      const entry: NonNullable<typeof background> = { path, done: Promise.resolve() };
      // Said at once, since training goes on; the next snapshot then fails the job with it.
      entry.done = pending!.done.catch((error) => {
        entry.error = error;
        console.error(`rank ${rank}: the background snapshot to ${path} failed: ${error}`);
      });
      background = entry;
      return;
    }
    if (strategy === "fsdp") {
      await saveShardedSnapshot(path, model, optimizer, info);
      return;
    }
    if (rank === 0) saveSnapshot(path, model, optimizer, info);
  } catch (error) {
    // An operating system error has a code (ENOSPC, EACCES, ...): one line, not a stack trace.
    const code = (error as { code?: unknown }).code;
    if (typeof code !== "string") throw error;
    const reason = (error as Error).message.replace(/: \w+ '[^']*'$/, "");
    throw new CheckpointError(
      path,
      `could not be written (${reason}); the previous snapshot there, if any, is intact`,
      { cause: error },
    );
  }
  // No rank runs ahead of the file.
  if (worldSize > 1) await barrier();
}
