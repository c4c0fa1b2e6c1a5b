/**
 * Samplers: the order in which a loader visits a dataset's indices. `SequentialSampler` walks them
 * in order; `RandomSampler` draws a permutation per epoch from its seed.
 * @module
 */

import type { Sized } from "./dataset.ts";
import { checkSeed, permutation } from "./_random.ts";

/** A sampler's state for checkpoints: where its sequence of orders stands. */
export interface SamplerState {
  /** The epoch whose order the next pass draws. */
  epoch: number;
  /** The seed the orders are drawn from. */
  seed: number;
}

/**
 * An order of dataset indices (PyTorch's `torch.utils.data.Sampler`): iterating it yields one
 * epoch's indices; `length` says how many.
 */
export interface Sampler extends Iterable<number> {
  /** The number of indices one pass yields. */
  readonly length: number;
  /** Chooses the epoch whose order the next pass yields (samplers that shuffle have it). */
  setEpoch?(epoch: number): void;
}

/**
 * Throws a RangeError naming `what` unless `epoch` is a non-negative safe integer.
 *
 * @param what The caller, for the message.
 * @param epoch The epoch to check.
 * @ignore dtrain-internal (its module is re-exported with `export *`)
 */
export function checkEpoch(what: string, epoch: number): void {
  if (!Number.isSafeInteger(epoch) || epoch < 0) {
    throw new RangeError(`${what}: epoch ${epoch} is not a non-negative integer`);
  }
}

/**
 * Checks a state for `loadStateDict` and returns it; names the sampler and the bad field.
 *
 * @param what The sampler, for the message.
 * @param state The state to check.
 * @ignore dtrain-internal (its module is re-exported with `export *`)
 */
export function checkState(what: string, state: SamplerState): SamplerState {
  checkEpoch(what, state.epoch);
  checkSeed(what, state.seed);
  return { epoch: state.epoch, seed: state.seed };
}

/**
 * Yields 0, 1, ..., length - 1 (PyTorch's `SequentialSampler`).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { SequentialSampler } from "./mod.ts";
 * assert.deepEqual([...new SequentialSampler({ length: 3 })], [0, 1, 2]);
 * ```
 */
export class SequentialSampler implements Sampler {
  readonly #source: Sized;

  /**
   * Creates a `SequentialSampler`.
   *
   * @param source The dataset (anything with a `length`).
   */
  constructor(source: Sized) {
    this.#source = source;
  }

  /** The dataset's length. */
  get length(): number {
    return this.#source.length;
  }

  /** Yields the indices in order. */
  *[Symbol.iterator](): Iterator<number> {
    for (let i = 0; i < this.#source.length; i++) yield i;
  }
}

/** Options of {@linkcode RandomSampler}. */
export interface RandomSamplerOptions {
  /** Seed of the orders; epoch e draws its permutation from seed + e. Default 0. */
  seed?: number;
}

/**
 * Yields a random permutation of the indices, a fresh one per epoch (PyTorch's `RandomSampler`
 * without replacement). Epoch e's order is drawn from `seed + e`, so it is reproducible and can be
 * resumed from `stateDict()`. `setEpoch(e)` chooses the next pass's epoch; a pass started without
 * one uses the epoch after the previous pass's, so plain loops still see a new order each time.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { RandomSampler } from "./mod.ts";
 * const epoch3 = (seed: number) => {
 *   const sampler = new RandomSampler({ length: 5 }, { seed });
 *   sampler.setEpoch(3);
 *   return [...sampler];
 * };
 * const order = epoch3(1);
 * assert.deepEqual([...order].sort(), [0, 1, 2, 3, 4]); // a permutation of 0..4
 * assert.deepEqual(epoch3(1), order); // the same for seed 1 and epoch 3
 * ```
 */
export class RandomSampler implements Sampler {
  readonly #source: Sized;
  #seed: number;
  #epoch = 0;
  /** Whether `#epoch` has not been used by a pass yet. */
  #fresh = true;

  /**
   * Creates a `RandomSampler`.
   *
   * @param source The dataset (anything with a `length`).
   * @param options The seed.
   */
  constructor(source: Sized, options: RandomSamplerOptions = {}) {
    this.#source = source;
    this.#seed = options.seed ?? 0;
    checkSeed("RandomSampler", this.#seed);
  }

  /** The dataset's length. */
  get length(): number {
    return this.#source.length;
  }

  /** The seed of the orders. */
  get seed(): number {
    return this.#seed;
  }

  /** Chooses the epoch whose order the next pass yields. */
  setEpoch(epoch: number): void {
    checkEpoch("RandomSampler", epoch);
    this.#epoch = epoch;
    this.#fresh = true;
  }

  /** Yields the permutation of the current epoch. */
  [Symbol.iterator](): Iterator<number> {
    if (!this.#fresh) this.#epoch++;
    this.#fresh = false;
    checkSeed("RandomSampler", this.#seed + this.#epoch);
    return permutation(this.#source.length, this.#seed + this.#epoch)[Symbol.iterator]();
  }

  /** The epoch the next pass will use, and the seed. */
  stateDict(): SamplerState {
    return { epoch: this.#fresh ? this.#epoch : this.#epoch + 1, seed: this.#seed };
  }

  /** Restores a state from `stateDict()`. */
  loadStateDict(state: SamplerState): void {
    const { epoch, seed } = checkState("RandomSampler", state);
    this.#seed = seed;
    this.setEpoch(epoch);
  }
}
