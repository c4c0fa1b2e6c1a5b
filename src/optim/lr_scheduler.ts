/**
 * Learning-rate schedulers (PyTorch's `torch.optim.lr_scheduler`): `LambdaLR`, `StepLR` and cosine
 * decay with linear warmup, on one base class.
 * @module
 */

import type { Optimizer } from "./optimizer.ts";

/** Parameters of {@linkcode cosineWithWarmup}. */
export interface CosineWithWarmupOptions {
  /** Steps of linear warmup (see `warmup` for the two formulas). */
  warmupSteps: number;
  /** Step at which the cosine reaches minLr (nanoGPT's `lr_decay_iters`). */
  totalSteps: number;
  /** The floor of the decay (default 0). */
  minLr?: number;
  /**
   * The warm-up formula for `step < warmupSteps` (default "linear"):
   * - "linear": `baseLr * (step + 1) / warmupSteps`, which reaches baseLr at the last warm-up step;
   * - "nanogpt": `baseLr * (step + 1) / (warmupSteps + 1)`, nanoGPT's `get_lr` in train.py, which
   *   stays below baseLr until the cosine starts at `step = warmupSteps`.
   *
   * The decay is the same for both, and the same as nanoGPT's.
   */
  warmup?: "linear" | "nanogpt";
}

const WARMUPS = ["linear", "nanogpt"];

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
  if (o.warmup !== undefined && !WARMUPS.includes(o.warmup)) {
    throw new RangeError(
      `cosineWithWarmup: warmup must be "linear" or "nanogpt", got ${JSON.stringify(o.warmup)}`,
    );
  }
}

/**
 * The learning rate for optimizer step `step` (0-based). The two warm-up formulas side by side,
 * with nanoGPT's `get_lr` (train.py) where it agrees:
 *
 * - warming up, `step < warmupSteps`:
 *   - `warmup: "linear"` (default): `baseLr * (step + 1) / warmupSteps`;
 *   - `warmup: "nanogpt"`: `baseLr * (step + 1) / (warmupSteps + 1)`, as nanoGPT's
 *     `learning_rate * (it + 1) / (warmup_iters + 1)`;
 * - decaying, `warmupSteps <= step <= totalSteps`, both:
 *   `minLr + 0.5 * (baseLr - minLr) * (1 + cos(pi * progress))`, as nanoGPT's
 *   `min_lr + coeff * (learning_rate - min_lr)` with
 *   `coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))`;
 * - after `totalSteps` (`lr_decay_iters`), both: `minLr`;
 *
 * where `progress = (step - warmupSteps) / (totalSteps - warmupSteps)` (nanoGPT's `decay_ratio`).
 *
 * @param step The optimizer step (nanoGPT's `it`, `iter_num`).
 * @param baseLr The peak rate (nanoGPT's `learning_rate`).
 * @param options See {@linkcode CosineWithWarmupOptions}.
 * @returns The rate for `step`.
 *
 * @example nanoGPT's schedule
 * ```ts
 * import assert from "node:assert/strict";
 * import { cosineWithWarmup } from "./lr_scheduler.ts";
 * const options = { warmupSteps: 100, totalSteps: 5000, minLr: 1e-4, warmup: "nanogpt" } as const;
 * assert.equal(cosineWithWarmup(0, 1e-3, options), 1e-3 / 101);
 * assert.equal(cosineWithWarmup(100, 1e-3, options), 1e-3);
 * assert.equal(cosineWithWarmup(6000, 1e-3, options), 1e-4);
 * ```
 */
export function cosineWithWarmup(
  step: number,
  baseLr: number,
  options: CosineWithWarmupOptions,
): number {
  validate(options);
  const { warmupSteps, totalSteps } = options;
  const minLr = options.minLr ?? 0;
  if (step < warmupSteps) {
    const span = options.warmup === "nanogpt" ? warmupSteps + 1 : warmupSteps;
    return (baseLr * (step + 1)) / span;
  }
  // nanoGPT computes `min_lr + (0.5 * (1 + cos)) * (lr - min_lr)`: the halving is exact, so the
  // product, one rounding of the same two factors, is bit for bit this one.
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
 * step 0, and each `step()` (after `optimizer.step()`, as in PyTorch) moves to the next. The
 * options, `warmup` included, are those of `cosineWithWarmup`.
 *
 * @example nanoGPT's warm-up, one optimizer step at a time
 * ```ts
 * import assert from "node:assert/strict";
 * import { nn, optim } from "../../mod.ts";
 * const opt = new optim.AdamW(new nn.Linear(2, 1).parameters(), { lr: 6e-4 });
 * const scheduler = new optim.CosineWithWarmup(opt, {
 *   warmupSteps: 2,
 *   totalSteps: 10,
 *   minLr: 6e-5,
 *   warmup: "nanogpt",
 * });
 * assert.equal(opt.paramGroups[0].lr, 6e-4 / 3); // iter 0: learning_rate * 1 / (warmup_iters + 1)
 * opt.step();
 * scheduler.step();
 * assert.equal(opt.paramGroups[0].lr, (6e-4 * 2) / 3);
 * ```
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
