/** `--lr-schedule`: the epoch-based trainer's learning rate at each step. @module */

import { cosineWithWarmup } from "../optim/lr_scheduler.ts";
import type { Optimizer } from "../optim/optimizer.ts";
import type { TrainConfig } from "./_schema.ts";

/**
 * Sets the rate of the step about to run (`step` steps done) from the step count alone (so a
 * resumed run continues the same curve): constant, or `--lr-schedule cosine`, a linear warmup
 * over `--warmup-steps` then a cosine decay to a tenth of `--lr` at the run's last step.
 *
 * @param stepsPerEpoch Batches in one epoch, for a run without `--max-steps`.
 */
export function scheduleLr(
  config: TrainConfig,
  optimizer: Optimizer<{ lr: number }>,
  step: number,
  stepsPerEpoch: number,
): void {
  const { lr, lrSchedule, warmupSteps, maxSteps, epochs } = config;
  if (lrSchedule !== "cosine") return;
  const totalSteps = Math.max(maxSteps > 0 ? maxSteps : epochs * stepsPerEpoch, warmupSteps + 1);
  const rate = cosineWithWarmup(step, lr, { warmupSteps, totalSteps, minLr: lr / 10 });
  for (const group of optimizer.paramGroups) group.lr = rate;
}
