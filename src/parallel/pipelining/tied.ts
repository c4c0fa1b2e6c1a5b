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
  /**
   * This stage's copy, by its name in the stage module: looked up when used, because tensor
   * parallelism and FSDP replace a module's parameter by their shard of it.
   */
  readonly name: string;
  /** The stage indices that hold it, ascending (their gradients are summed in this order). */
  readonly stages: readonly number[];
}

const tied = new WeakMap<Module, TiedParameter[]>();

/**
 * Records that `module` (a stage's) holds the parameter `name`, which the stages `stages` share.
 * @ignore dtrain-internal
 */
export function tieAcrossStages(module: Module, name: string, stages: number[]): void {
  const list = tied.get(module) ?? [];
  list.push({ name, stages: [...stages].sort((a, b) => a - b) });
  tied.set(module, list);
}

/**
 * The tied parameters `module` holds (none for a module that no split registered).
 * @ignore dtrain-internal
 */
export function tiedParameters(module: Module): readonly TiedParameter[] {
  return tied.get(module) ?? [];
}

/**
 * The parameter `module` holds now under the name `tie.name` (its shard, once sharded).
 * @ignore dtrain-internal
 */
export function tiedParameter(module: Module, tie: TiedParameter): Parameter {
  for (const [name, p] of module.namedParameters()) if (name === tie.name) return p;
  throw new Error(`pipeline: the stage module has no parameter ${tie.name} (tied across stages)`);
}
