/** Learning-rate schedules: cosine decay with linear warmup. @module */

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

/**
 * Applies {@linkcode cosineWithWarmup} to an optimizer's groups: the constructor sets the rate for
 * step 0, and each `step()` (after `optimizer.step()`, as in PyTorch) moves to the next.
 *
 * The base rate of each group is its `initialLr` option (PyTorch's `initial_lr`), set from `lr`
 * by the first scheduler built over the group. It travels in the optimizer's state dict, so a
 * scheduler built after `optimizer.loadStateDict` (a resumed job) decays from the original base,
 * not from the already scheduled `lr` that was saved.
 */
export class CosineWithWarmup {
  /** The number of `step()` calls so far. */
  lastStep = 0;

  /**
   * @param optimizer The optimizer whose groups' `lr` this sets.
   * @param options See {@linkcode CosineWithWarmupOptions}.
   */
  constructor(
    readonly optimizer: Optimizer<{ lr: number }>,
    readonly options: CosineWithWarmupOptions,
  ) {
    validate(options);
    this.#apply();
  }

  /** Advances one step. */
  step(): void {
    this.lastStep++;
    this.#apply();
  }

  /** The current learning rate of each group. */
  getLastLr(): number[] {
    return this.optimizer.paramGroups.map((g) => g.options.lr);
  }

  /** `{ lastStep }`, for snapshots. */
  stateDict(): { lastStep: number } {
    return { lastStep: this.lastStep };
  }

  /** Restores a state from `stateDict()`. */
  loadStateDict(state: { lastStep: number }): void {
    this.lastStep = state.lastStep;
    this.#apply();
  }

  #apply(): void {
    // Read through paramGroups each time: optimizer.loadStateDict replaces the options objects.
    for (const { options } of this.optimizer.paramGroups) {
      const group: { lr: number; initialLr?: number } = options;
      group.initialLr ??= group.lr;
      group.lr = cosineWithWarmup(this.lastStep, group.initialLr, this.options);
    }
  }
}
