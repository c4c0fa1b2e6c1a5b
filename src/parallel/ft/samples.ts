/**
 * Which samples each replica takes at a step: a function of the step and that step's quorum
 * alone, so that replicas agree without talking, a retried step takes the same samples, and a run
 * with failures takes each sample at most once.
 * @module
 */

/** A run of sample indices, `start` included, `end` excluded. */
export interface SampleRange {
  /** The first index. */
  start: number;
  /** One past the last index. */
  end: number;
}

/** The samples of one step: each member's share, and what no member takes. */
export interface StepSamples {
  /** Member i's share (members by ascending replica id). */
  shares: SampleRange[];
  /** The step's samples that no member takes (fewer than the members). */
  skipped: SampleRange | null;
}

/**
 * Splits step `step`'s `batchSize` samples (indices `step·batchSize` up to the next step's) over
 * `members` replicas: equal contiguous shares in member order, so every replica's mean gradient
 * weighs the same number of samples and their average is the mean over the samples taken. The
 * `batchSize mod members` samples at the step's end are skipped.
 *
 * @param step The step (steps committed so far).
 * @param batchSize Samples per step over all replicas.
 * @param members Replicas in the step's quorum.
 * @returns The shares and the skipped run.
 * @throws RangeError when there are more members than samples, or a count is not an integer.
 *
 * @example Ten samples over three replicas
 * ```ts
 * import assert from "node:assert/strict";
 * import { stepSamples } from "./samples.ts";
 * assert.deepEqual(stepSamples(2, 10, 3), {
 *   shares: [{ start: 20, end: 23 }, { start: 23, end: 26 }, { start: 26, end: 29 }],
 *   skipped: { start: 29, end: 30 },
 * });
 * ```
 */
export function stepSamples(step: number, batchSize: number, members: number): StepSamples {
  for (const [name, v, least] of [["step", step, 0], ["batchSize", batchSize, 1]] as const) {
    if (!Number.isInteger(v) || v < least) {
      throw new RangeError(
        `stepSamples: ${name} must be an integer of at least ${least}, got ${v}`,
      );
    }
  }
  if (!Number.isInteger(members) || members < 1 || members > batchSize) {
    throw new RangeError(
      `stepSamples: ${members} replicas cannot share a batch of ${batchSize} samples`,
    );
  }
  const share = Math.floor(batchSize / members);
  const first = step * batchSize;
  const shares = Array.from({ length: members }, (_, i) => ({
    start: first + i * share,
    end: first + (i + 1) * share,
  }));
  const taken = first + members * share;
  const end = first + batchSize;
  return { shares, skipped: taken < end ? { start: taken, end } : null };
}
