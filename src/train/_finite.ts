/**
 * Stopping a run that diverged before it spoils anything: every step's loss and gradient norm are
 * checked before the optimizer applies them, and a snapshot's tensors before it is committed (and
 * after it is loaded), so that the last good snapshot is never replaced by one holding NaN or
 * infinity.
 * @module
 */

import type { Module } from "../nn/module.ts";
import type { Optimizer } from "../optim/optimizer.ts";
import { noGrad } from "../tensor/autograd.ts";
import { tidy } from "../tensor/scope.ts";
import { clipGradNorm } from "../nn/utils/clip_grad.ts";
import type { Tensor } from "../tensor/tensor.ts";
import { sumOverRanks } from "./_stats.ts";

/** A run that diverged: a non-finite loss or gradient norm, or non-finite values to be saved. */
export class DivergedError extends Error {
  override name = "DivergedError";
}

/** Whether every value of `t` is finite: NaN and ±Infinity times 0 are NaN, the rest 0. */
function allFinite(t: Tensor): boolean {
  return t.dtype !== "f32" || tidy(() => noGrad(() => t.mul(0).sum().item())) === 0;
}

/**
 * Checks one step after its backward pass, before the optimizer step: every rank calls it, and
 * all agree (one all-reduce of two numbers), so that they stop at the same step.
 *
 * @param model The model, whose gradients are this rank's: all of them under DDP, its shards
 *   under FSDP or TP (whose norms `clipGradNorm` combines over their groups).
 * @param loss This rank's loss of the step.
 * @param step The step's number over the run, from 1, for the message.
 * @param measured The norm, when the caller measured it (a pipeline's, over its stages).
 * @returns The L2 norm of all gradients together (PyTorch's `clip_grad_norm_` total), the same
 *   on every rank.
 * @throws DivergedError on every rank when a rank's loss or the gradient norm is not finite.
 */
export async function checkStep(
  model: Module,
  loss: number,
  step: number,
  worldSize: number,
  measured?: number,
): Promise<number> {
  // An infinite maxNorm measures without scaling (a non-finite norm throws below).
  const norm = measured ?? clipGradNorm(model.parameters(), Infinity);
  const [badLosses, badNorms] = await sumOverRanks(
    [Number.isFinite(loss) ? 0 : 1, Number.isFinite(norm) ? 0 : 1],
    worldSize,
  );
  if (badLosses === 0 && badNorms === 0) return norm;
  const ranks = worldSize > 1 ? ` on ${badLosses} of ${worldSize} ranks` : "";
  const what = badLosses > 0 ? `the loss is not finite${ranks}` : "the gradient norm is not finite";
  throw new DivergedError(
    `step ${step}: ${what} (this rank's loss ${loss}, gradient norm ${norm}): the run diverged; ` +
      "stopped before the optimizer step, without saving a snapshot",
  );
}

/**
 * Refuses to save a model or optimizer state holding NaN or infinity: every rank calls it before
 * a snapshot is written (under FSDP each checks its shards, and they agree by an all-reduce).
 *
 * @param path The snapshot, for the message.
 * @param step The step the snapshot is of.
 * @throws DivergedError on every rank when a parameter or its optimizer state is not finite.
 */
export async function checkFiniteBeforeSave(
  path: string,
  step: number,
  model: Module,
  optimizer: Optimizer<{ lr: number }>,
  sharded: boolean,
  worldSize: number,
): Promise<void> {
  const bad = firstNonFinite(model, optimizer);
  const [ranks] = await sumOverRanks([bad === null ? 0 : 1], sharded ? worldSize : 1);
  if (ranks === 0) return;
  throw new DivergedError(
    `step ${step}: ${bad ?? "another rank's shard"} holds non-finite values: the run diverged; ` +
      `the snapshot was not written, ${path} stays as it was`,
  );
}

/**
 * The first of this rank's parameters (or a parameter's optimizer state) holding NaN or ±Infinity,
 * named for a message, or null: checked before a snapshot is written and after one is loaded.
 */
export function firstNonFinite(model: Module, optimizer: Optimizer<{ lr: number }>): string | null {
  for (const [name, p] of model.namedParameters()) {
    if (!allFinite(p)) return `parameter ${name}`;
    for (const [field, v] of Object.entries(optimizer.state.get(p) ?? {})) {
      if (typeof v === "number" ? !Number.isFinite(v) : !allFinite(v)) {
        return `the optimizer's ${field} of parameter ${name}`;
      }
    }
  }
  return null;
}
