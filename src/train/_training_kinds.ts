/**
 * The two kinds of training the job runs, and the settings each alone reads: nanoGPT's
 * iterations (`--dataset tokens`) and epochs (every other dataset). The parser refuses a setting
 * of the other kind; the report lists only the run's.
 * @module
 */

import { ConfigError } from "./_schema.ts";

/** Fields only iteration-based training (`--dataset tokens`, as nanoGPT's train.py) reads. */
export const ITERATION_ONLY = [
  "dataDir",
  "outDir",
  "maxIters",
  "evalInterval",
  "evalIters",
  "logInterval",
  "evalOnly",
  "alwaysSaveCheckpoint",
  "initFrom",
  "gradientAccumulationSteps",
  "decayLr",
  "warmupIters",
  "lrDecayIters",
  "minLr",
] as const;
/** Fields only epoch-based training (every other dataset) reads. */
export const EPOCH_ONLY = [
  "epochs",
  "saveEvery",
  "saveEverySteps",
  "lrSchedule",
  "warmupSteps",
  "maxSteps",
  "logEvery",
  "dataRoot",
] as const;

/**
 * Refuses a setting that the chosen kind of training would silently ignore.
 *
 * @param given The settings the user gave (flags and config file), by field.
 * @throws ConfigError naming the stray setting and the kind it belongs to.
 */
export function checkOneKind(given: Record<string, unknown>): void {
  const tokens = given.dataset === "tokens";
  const stray = (tokens ? EPOCH_ONLY : ITERATION_ONLY).find((f) => given[f] !== undefined);
  if (stray === undefined) return;
  throw new ConfigError(
    stray,
    tokens
      ? "is for epoch-based training; --dataset tokens trains by iterations as nanoGPT " +
        "(--max-iters, --eval-interval, --warmup-iters, --lr-decay-iters, --out-dir, ...)"
      : "is for iteration-based training, with --dataset tokens (nanoGPT's train.bin/val.bin)",
  );
}
