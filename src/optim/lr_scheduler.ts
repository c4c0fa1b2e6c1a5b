/**
 * Learning-rate schedulers (PyTorch's `torch.optim.lr_scheduler`): `LambdaLR`, `StepLR` and cosine
 * decay with linear warmup, on one base class.
 * @module
 */

import type { Optimizer } from "./optimizer.ts";

/** Parameters of {@linkcode cosineWithWarmup}. */
export interface CosineWithWarmupOptions {
  /** Steps of linear warmup from baseLr/warmupSteps up to baseLr. */
  warmupSteps: number;
  /** Step at which the cosine reaches minLr. */
  totalSteps: number;
  /** The floor of the decay (default 0). */
  minLr?: number;
}

function validate(o: CosineWithWarmupOptions): void {
  if (!Number.isInteger(o.warmupSteps) || o.warmupSteps < 0) {
    throw new RangeError(
      `cosineWithWarmup: warmupSteps must be a non-negative integer, got ${o.warmupSteps}`,
    );
  }
  if (!Number.isInteger(o.totalSteps) || o.totalSteps <= o.warmupSteps) {
    throw new RangeError(
      `cosineWithWarmup: totalSteps (${o.totalSteps}) must be an integer above warmupSteps (${o.warmupSteps})`,
    );
  }
}

/**
 * The learning rate for optimizer step `step` (0-based): `baseLr * (step + 1) / warmupSteps` while
 * warming up, then `minLr + (baseLr - minLr) * (1 + cos(pi * progress)) / 2`, held at minLr after
 * totalSteps.
 */
export function cosineWithWarmup(
  step: number,
  baseLr: number,
  options: CosineWithWarmupOptions,
): number {
  validate(options);
  const { warmupSteps, totalSteps } = options;
  const minLr = options.minLr ?? 0;
  if (step < warmupSteps) return (baseLr * (step + 1)) / warmupSteps;
  const progress = Math.min(1, (step - warmupSteps) / (totalSteps - warmupSteps));
  return minLr + 0.5 * (baseLr - minLr) * (1 + Math.cos(Math.PI * progress));
}

/** A scheduler's state dict (PyTorch's `last_epoch` and `base_lrs`, camelCase). */
export interface LRSchedulerState {
  /** The number of `step()` calls so far. */
  lastEpoch: number;
  /** The base rate of each group. */
  baseLrs?: number[];
}

/**
 * The base of the schedulers (PyTorch's `LRScheduler`): it sets every group's `lr` to
 * `lrAt(lastEpoch, baseLr, groupIndex)`, at construction (epoch 0) and after each `step()`.
 *
 * The base rate of each group is its `initialLr` (PyTorch's `initial_lr`), taken from `lr` by the
 * first scheduler built over the group. It travels in the optimizer's state dict, so a scheduler
 * built after `optimizer.loadStateDict` (a resumed job) starts from the original base, not from
 * the already scheduled `lr` that was saved. Rates are computed in closed form from the base (as
 * PyTorch's `_get_closed_form_lr`), so `loadStateDict` sets exactly the rate of the restored step.
 */
export class LRScheduler {
  /** The number of `step()` calls so far (PyTorch's `last_epoch`; usually optimizer steps). */
  lastEpoch = 0;
  /** The base rate of each group. */
  baseLrs: number[];
  #lastLr: number[] = [];

  /**
   * Creates a `LRScheduler`.
   *
   * @param optimizer The optimizer whose groups' `lr` this sets.
   * @param lrAt The rate of group `group` at epoch `epoch` from its base rate.
   */
  constructor(
    readonly optimizer: Optimizer<{ lr: number }>,
    readonly lrAt: (epoch: number, baseLr: number, group: number) => number,
  ) {
    this.baseLrs = optimizer.paramGroups.map((g) => {
      const group: { lr: number; initialLr?: number } = g;
      return group.initialLr ??= group.lr;
    });
    this.#apply();
  }

  /** Advances one epoch (call it after `optimizer.step()`, as in PyTorch). */
  step(): void {
    this.lastEpoch++;
    this.#apply();
  }

  /** The rate this scheduler last set for each group. */
  getLastLr(): number[] {
    return [...this.#lastLr];
  }

  /** `{ lastEpoch, baseLrs }`, for snapshots. */
  stateDict(): LRSchedulerState {
    return { lastEpoch: this.lastEpoch, baseLrs: [...this.baseLrs] };
  }

  /** Restores a state from `stateDict()` and sets the groups' rates for that epoch. */
  loadStateDict(state: LRSchedulerState): void {
    if (!Number.isInteger(state.lastEpoch) || state.lastEpoch < 0) {
      throw new RangeError(
        `${this.constructor.name}.loadStateDict: lastEpoch must be a non-negative integer, got ${state.lastEpoch}`,
      );
    }
    const groups = this.optimizer.paramGroups.length;
    if (state.baseLrs && state.baseLrs.length !== groups) {
      throw new Error(
        `${this.constructor.name}.loadStateDict: ${state.baseLrs.length} base rates for ${groups} parameter groups`,
      );
    }
    this.lastEpoch = state.lastEpoch;
    if (state.baseLrs) this.baseLrs = [...state.baseLrs];
    this.#apply();
  }

  #apply(): void {
    // Read through paramGroups each time: optimizer.loadStateDict may have changed them.
    this.#lastLr = this.optimizer.paramGroups.map((group, i) =>
      group.lr = this.lrAt(this.lastEpoch, this.baseLrs[i], i)
    );
  }
}

/**
 * Multiplies each group's base rate by `lrLambda(epoch)` (PyTorch's `LambdaLR`); one function for
 * every group or one per group.
 *
 * @example Exponential decay
 * ```ts
 * import assert from "node:assert/strict";
 * import { nn, optim } from "../../mod.ts";
 * const opt = new optim.SGD(new nn.Linear(2, 1).parameters(), { lr: 0.1 });
 * const scheduler = new optim.LambdaLR(opt, (epoch) => 0.5 ** epoch);
 * opt.step();
 * scheduler.step();
 * assert.deepEqual(scheduler.getLastLr(), [0.05]);
 * assert.equal(opt.paramGroups[0].lr, 0.05);
 * ```
 */
export class LambdaLR extends LRScheduler {
  /**
   * Creates a `LambdaLR`.
   *
   * @param optimizer The optimizer whose groups' `lr` this sets.
   * @param lrLambda The factor for an epoch, or one such function per parameter group.
   */
  constructor(
    optimizer: Optimizer<{ lr: number }>,
    lrLambda: ((epoch: number) => number) | ((epoch: number) => number)[],
  ) {
    const groups = optimizer.paramGroups.length;
    if (Array.isArray(lrLambda) && lrLambda.length !== groups) {
      throw new RangeError(
        `LambdaLR: expected ${groups} lrLambda functions (one per parameter group), got ${lrLambda.length}`,
      );
    }
    const lambdas = Array.isArray(lrLambda) ? lrLambda : Array(groups).fill(lrLambda);
    lambdas.forEach((f, i) => {
      if (typeof f !== "function") {
        throw new TypeError(`LambdaLR: lrLambda ${i} is not a function, got ${typeof f}`);
      }
    });
    super(optimizer, (epoch, base, group) => base * lambdas[group](epoch));
  }
}

/** Options of {@linkcode StepLR}. */
export interface StepLROptions {
  /** Epochs between two decays. */
  stepSize: number;
  /** The factor of each decay (default 0.1). */
  gamma?: number;
}

/**
 * Multiplies the rate by `gamma` every `stepSize` epochs: `baseLr * gamma ** floor(epoch /
 * stepSize)` (PyTorch's `StepLR`).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { nn, optim } from "../../mod.ts";
 * const opt = new optim.SGD(new nn.Linear(2, 1).parameters(), { lr: 1 });
 * const scheduler = new optim.StepLR(opt, { stepSize: 2, gamma: 0.5 });
 * const lrs = [];
 * for (let epoch = 0; epoch < 5; epoch++) {
 *   lrs.push(scheduler.getLastLr()[0]);
 *   opt.step();
 *   scheduler.step();
 * }
 * assert.deepEqual(lrs, [1, 1, 0.5, 0.5, 0.25]);
 * ```
 */
export class StepLR extends LRScheduler {
  /**
   * Creates a `StepLR`.
   *
   * @param optimizer The optimizer whose groups' `lr` this sets.
   * @param options See {@linkcode StepLROptions}.
   */
  constructor(optimizer: Optimizer<{ lr: number }>, options: StepLROptions) {
    const { stepSize, gamma = 0.1 } = options;
    if (!Number.isInteger(stepSize) || stepSize <= 0) {
      throw new RangeError(`StepLR: stepSize must be a positive integer, got ${stepSize}`);
    }
    if (!(gamma >= 0)) throw new RangeError(`StepLR: gamma must be non-negative, got ${gamma}`);
    super(optimizer, (epoch, base) => base * gamma ** Math.floor(epoch / stepSize));
  }
}

/**
 * Applies {@linkcode cosineWithWarmup} to an optimizer's groups: the constructor sets the rate for
 * step 0, and each `step()` (after `optimizer.step()`, as in PyTorch) moves to the next.
 */
export class CosineWithWarmup extends LRScheduler {
  /**
   * Creates a `CosineWithWarmup`.
   *
   * @param optimizer The optimizer whose groups' `lr` this sets.
   * @param options See {@linkcode CosineWithWarmupOptions}.
   */
  constructor(optimizer: Optimizer<{ lr: number }>, readonly options: CosineWithWarmupOptions) {
    validate(options);
    super(optimizer, (step, base) => cosineWithWarmup(step, base, options));
  }
}
