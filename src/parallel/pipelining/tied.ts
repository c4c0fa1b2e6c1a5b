/**
 * Parameters that two pipeline stages hold as one (the GPT's `wte`/`lm_head`, see [Note: the
 * tied embedding across stages] in split_gpt.ts): which stage modules hold them, so that a
 * schedule can sum their gradients across the ranks holding those stages after each step.
 * @module
 */

import type { Module } from "../../nn/module.ts";
import type { Parameter } from "../../nn/parameter.ts";

/** A parameter held, as one, by each of `stages`. */
export interface TiedParameter {
  /** This stage's copy. */
  readonly param: Parameter;
  /** The stage indices that hold it, ascending (their gradients are summed in this order). */
  readonly stages: readonly number[];
}

const tied = new WeakMap<Module, TiedParameter[]>();

/**
 * Records that `module` (a stage's) holds `param`, which the stages `stages` share.
 * @ignore dtrain-internal
 */
export function tieAcrossStages(module: Module, param: Parameter, stages: number[]): void {
  const list = tied.get(module) ?? [];
  list.push({ param, stages: [...stages].sort((a, b) => a - b) });
  tied.set(module, list);
}

/**
 * The tied parameters `module` holds (none for a module that no split registered).
 * @ignore dtrain-internal
 */
export function tiedParameters(module: Module): readonly TiedParameter[] {
  return tied.get(module) ?? [];
}
