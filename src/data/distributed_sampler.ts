/**
 * `DistributedSampler`: each of `numReplicas` processes takes its own share of every epoch's order,
 * with PyTorch's exact arithmetic (torch/utils/data/distributed.py) so that a job reads the same
 * samples on the same ranks as its PyTorch counterpart would for the same permutation.
 * @module
 */

import { getRank, getWorldSize } from "../distributed/mod.ts";
import type { Sized } from "./dataset.ts";
import { checkSeed, permutation } from "./_random.ts";
import { checkEpoch, checkState, type Sampler, type SamplerState } from "./sampler.ts";

/** A DistributedSampler's state: the epoch, the seed, and where in the epoch's order it is. */
export interface DistributedSamplerState extends SamplerState {
  /**
   * Samples of the epoch's global order consumed already, by all ranks together (absent: 0). It
   * does not depend on the world size, so a job restarted with fewer or more ranks goes on
   * from there.
   */
  position?: number;
}

/** Options of {@linkcode DistributedSampler}. */
export interface DistributedSamplerOptions {
  /** The number of processes sharing the dataset. Default: the process group's world size. */
  numReplicas?: number;
  /** This process's rank, in [0, numReplicas). Default: the rank in the process group. */
  rank?: number;
  /** Whether to permute the indices (the same permutation on every rank). Default true. */
  shuffle?: boolean;
  /** Seed of the permutations, the same on every rank; epoch e uses seed + e. Default 0. */
  seed?: number;
  /**
   * Drop the tail so that every rank gets the same count, instead of padding with indices from
   * the start. Default false.
   */
  dropLast?: boolean;
}

/**
 * Restricts loading to one rank's share of the dataset (PyTorch's `DistributedSampler`).
 *
 * Each epoch all ranks draw the same order (a permutation seeded by seed + epoch, or 0..n-1), make
 * its length a multiple of `numReplicas` (padding by repeating indices from the start, or with
 * `dropLast` truncating), and rank r takes every `numReplicas`-th index from position r. Call
 * `setEpoch(e)` before each epoch, or every epoch repeats the same order.
 *
 * [Note: resuming mid-epoch at another world size]
 * `startAt(p)` skips the first p positions of the epoch's global order, the ones a job consumed
 * before it was restarted (a step of batch B on W ranks consumes positions [sBW, (s+1)BW)). The
 * remaining n - p positions are dealt to the ranks as at the start of an epoch: rank r takes
 * p + r, p + r + W, ... , padded by repeating the remaining order from its start. Whatever W was
 * before, every sample of the epoch is then drawn exactly once, unless n - p is not a multiple of
 * the new W (then up to W - 1 are drawn twice, as PyTorch's padding does).
 *
 * @example Rank 1 of 3 over 10 samples
 * ```ts
 * import assert from "node:assert/strict";
 * import { DistributedSampler } from "./mod.ts";
 * const sampler = new DistributedSampler({ length: 10 }, { numReplicas: 3, rank: 1, shuffle: false });
 * assert.deepEqual([...sampler], [1, 4, 7, 0]); // 10 padded to 12 by repeating index 0 and 1
 * ```
 */
export class DistributedSampler implements Sampler {
  readonly #source: Sized;
  /** The number of processes sharing the dataset. */
  readonly numReplicas: number;
  /** This process's rank. */
  readonly rank: number;
  /** Whether the order is permuted. */
  readonly shuffle: boolean;
  /** Whether the tail is dropped rather than padded. */
  readonly dropLast: boolean;
  #seed: number;
  #epoch = 0;
  #position = 0;

  /**
   * Creates a `DistributedSampler`.
   *
   * @param source The dataset (anything with a `length`).
   * @param options The world size and rank (from the process group when omitted), shuffle, seed
   * and dropLast.
   */
  constructor(source: Sized, options: DistributedSamplerOptions = {}) {
    const { shuffle = true, seed = 0, dropLast = false } = options;
    const numReplicas = options.numReplicas ?? fromProcessGroup("numReplicas", getWorldSize);
    const rank = options.rank ?? fromProcessGroup("rank", getRank);
    if (!Number.isSafeInteger(numReplicas) || numReplicas < 1) {
      throw new RangeError(
        `DistributedSampler: numReplicas ${numReplicas} is not a positive integer`,
      );
    }
    if (!Number.isSafeInteger(rank) || rank < 0 || rank >= numReplicas) {
      throw new RangeError(
        `DistributedSampler: rank ${rank} is out of range [0, ${numReplicas}) for numReplicas ${numReplicas}`,
      );
    }
    checkSeed("DistributedSampler", seed);
    this.#source = source;
    this.numReplicas = numReplicas;
    this.rank = rank;
    this.shuffle = shuffle;
    this.dropLast = dropLast;
    this.#seed = seed;
  }

  /** The number of indices this rank yields per epoch (PyTorch's `num_samples`). */
  get length(): number {
    const n = this.#source.length - this.#position, r = this.numReplicas;
    // Python's math.ceil of a negative fraction is 0, JavaScript's is -0.
    if (this.dropLast && n % r !== 0) return Math.max(0, Math.ceil((n - r) / r));
    return Math.ceil(n / r);
  }

  /** The positions all ranks share from `position` on, a multiple of `numReplicas` (`total_size`). */
  get totalSize(): number {
    return this.length * this.numReplicas;
  }

  /** The seed of the permutations. */
  get seed(): number {
    return this.#seed;
  }

  /** The epoch whose order the next pass yields. */
  get epoch(): number {
    return this.#epoch;
  }

  /** Where in the epoch's global order the next pass starts (see `startAt`). */
  get position(): number {
    return this.#position;
  }

  /**
   * Chooses the epoch whose order the next pass yields, from its start; call it with the same
   * epoch on every rank.
   */
  setEpoch(epoch: number): void {
    checkEpoch("DistributedSampler", epoch);
    this.#epoch = epoch;
    this.#position = 0;
  }

  /**
   * Makes the next pass skip the first `position` samples of the epoch's global order (consumed,
   * by any number of ranks, before a restart); see the note on resuming above.
   *
   * @example Two ranks go on where four stopped
   * ```ts
   * import { equal as assertEquals } from "node:assert/strict";
   * import { DistributedSampler } from "./mod.ts";
   * const sampler = new DistributedSampler({ length: 12 }, { numReplicas: 2, rank: 1, shuffle: false });
   * sampler.startAt(8); // four ranks consumed positions 0..7
   * assertEquals([...sampler].join(), "9,11");
   * ```
   */
  startAt(position: number): void {
    if (!Number.isSafeInteger(position) || position < 0 || position > this.#source.length) {
      throw new RangeError(
        `DistributedSampler: position ${position} is outside the epoch's ${this.#source.length} samples`,
      );
    }
    this.#position = position;
  }

  /** This rank's indices for the current epoch, as one array. */
  indices(): Int32Array {
    const n = this.#source.length, total = this.totalSize;
    let order: Int32Array;
    if (this.shuffle) {
      checkSeed("DistributedSampler", this.#seed + this.#epoch);
      order = permutation(n, this.#seed + this.#epoch);
    } else {
      order = new Int32Array(n);
      for (let i = 0; i < n; i++) order[i] = i;
    }
    // Padding repeats the remaining order as often as needed (from position, wrapping within the
    // remaining samples); dropLast never needs more than them, so positions below total cover both.
    const start = this.#position, left = n - start;
    const mine = new Int32Array(this.length);
    for (let k = 0, q = this.rank; q < total; k++, q += this.numReplicas) {
      mine[k] = order[start + (q % left)];
    }
    return mine;
  }

  /** Yields this rank's indices for the current epoch. */
  [Symbol.iterator](): Iterator<number> {
    return this.indices()[Symbol.iterator]();
  }

  /** The epoch and seed, and the position when the pass does not start the epoch. */
  stateDict(): DistributedSamplerState {
    const state: DistributedSamplerState = { epoch: this.#epoch, seed: this.#seed };
    if (this.#position > 0) state.position = this.#position;
    return state;
  }

  /** Restores a state from `stateDict()` (a state without a position starts the epoch). */
  loadStateDict(state: DistributedSamplerState): void {
    const { epoch, seed } = checkState("DistributedSampler", state);
    this.#seed = seed;
    this.#epoch = epoch;
    this.startAt(state.position ?? 0);
  }
}

/** The world size or rank of the initialised process group, or an error saying how to give it. */
function fromProcessGroup(option: string, read: () => number): number {
  try {
    return read();
  } catch (cause) {
    throw new Error(
      `DistributedSampler: ${option} was not given and the process group cannot supply it ` +
        `(${(cause as Error).message})`,
      { cause },
    );
  }
}
