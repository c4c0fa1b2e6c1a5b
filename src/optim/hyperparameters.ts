/**
 * The one statement of what an optimizer's hyperparameters and per-parameter state numbers may
 * be. The constructors, `Optimizer.loadStateDict`, a DDP snapshot's metadata and a sharded
 * checkpoint's index all check with these schemas, so a value read from a file is held to what a
 * constructor accepts (a negative rate or a momentum of 1e308 would otherwise train into NaN).
 * @module
 */

import { z } from "zod";

// zod 4's z.number() already refuses NaN and ±Infinity: every number here is finite.
const unit = z.number().min(0).lt(1);
const count = z.number().int().nonnegative();

/**
 * One parameter group's hyperparameters (without `params`): the ones dtrain's optimizers and
 * schedulers read are checked, any other key passes as it is.
 */
export const HyperparametersSchema = z.looseObject({
  lr: z.number().nonnegative(),
  /** A scheduler's base rate (PyTorch's `initial_lr`). */
  initialLr: z.number().nonnegative().optional(),
  momentum: unit.optional(),
  dampening: z.number().min(0).max(1).optional(),
  weightDecay: z.number().nonnegative().optional(),
  betas: z.tuple([unit, unit]).optional(),
  eps: z.number().positive().optional(),
  nesterov: z.boolean().optional(),
});

/** One parameter's number-valued state: finite numbers, and `step` a count of steps. */
export const StateScalarsSchema = z.object({ step: count.optional() }).catchall(z.number());

/** What PyTorch's constructors call each hyperparameter in their errors ("invalid learning rate"). */
const LABELS: Record<string, string> = {
  lr: "learning rate",
  initialLr: "initial learning rate",
  momentum: "momentum value",
  dampening: "dampening value",
  weightDecay: "weightDecay value",
  eps: "epsilon value",
  betas: "beta parameter",
  nesterov: "nesterov value",
};

/** A failed check's first problem: the field's path, the value seen there, the rule broken. */
export interface Issue {
  path: PropertyKey[];
  seen: unknown;
  message: string;
}

/** The first problem `error` found in `value` (what `schema.safeParse(value)` refused). */
export function firstIssue(error: z.ZodError, value: unknown): Issue {
  const { path, message } = error.issues[0];
  const seen = path.reduce<unknown>(
    (v, k) => (v !== null && typeof v === "object" ? (v as Record<PropertyKey, unknown>)[k] : v),
    value,
  );
  return { path, seen, message };
}

/** `value` as an error message shows it (JSON, but NaN and Infinity by name; cut short). */
export function shown(value: unknown): string {
  const text = typeof value === "number" ? String(value) : JSON.stringify(value) ?? String(value);
  return text.slice(0, 60);
}

/**
 * Refuses hyperparameters that break the rules, as PyTorch's constructors do.
 *
 * @param owner The optimizer's name, for the message.
 * @param hyperparameters A group's or the defaults' hyperparameters.
 * @throws RangeError naming the hyperparameter and the value, e.g. `SGD: invalid learning rate: -1`.
 */
export function checkHyperparameters(owner: string, hyperparameters: unknown): void {
  const result = HyperparametersSchema.safeParse(hyperparameters);
  if (result.success) return;
  const issue = firstIssue(result.error, hyperparameters);
  const [field, index] = issue.path;
  const label = LABELS[String(field)] ?? String(field);
  const at = index === undefined ? "" : ` at index ${String(index)}`;
  throw new RangeError(`${owner}: invalid ${label}${at}: ${shown(issue.seen)} (${issue.message})`);
}
