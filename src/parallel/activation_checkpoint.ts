/**
 * `applyActivationCheckpointing`: torchtitan's per-transformer-block activation checkpointing
 * (`apply_ac`): each chosen block's forward runs through `nn.utils.checkpoint`, so backward
 * recomputes the block instead of keeping its activations.
 * @module
 */

import { GPT } from "../nn/gpt.ts";
import type { Module } from "../nn/module.ts";
import { checkpoint } from "../nn/utils/checkpoint.ts";

/** Options of {@linkcode applyActivationCheckpointing}. */
export interface ActivationCheckpointOptions {
  /**
   * "full": every block is checkpointed. "selective": every `every`-th block (torchtitan's layer
   * selective AC, `selective_ac_option: "N"`: with `every: 2`, the 2nd, 4th, ... block).
   */
  mode: "full" | "selective";
  /** With "selective": checkpoint every N-th block (a positive integer; required there). */
  every?: number;
  /**
   * Which submodules are the blocks, by dotted name (as `namedModules` gives them) or by a
   * predicate on (name, module). Default for `nn.GPT`: the children of `transformer.h`; other
   * models must say.
   */
  blocks?: readonly string[] | ((name: string, module: Module) => boolean);
}

const WRAPPED = Symbol("activationCheckpointed");

/**
 * Wraps the forward of each chosen transformer block of `model` in `nn.utils.checkpoint`, in
 * place (torchtitan's `apply_ac`, full or layer-selective). Either order with `fullyShard`
 * works: torchtitan's (AC first, then `fullyShard` per block) keeps FSDP's hooks outside the
 * checkpointed region; after `fullyShard`, FSDP gathers the block's parameters before the
 * recompute in backward (see [Note: recompute preparations] in src/nn/utils/checkpoint.ts). A
 * block checkpointed twice is refused.
 *
 * @param model The model (`nn.GPT`, or any module with `blocks` given).
 * @param options See {@linkcode ActivationCheckpointOptions}.
 * @returns The dotted names of the blocks now checkpointed, in order.
 * @throws Error for a bad mode, `every`, or block list, a block already checkpointed, and a model
 *   that is not a GPT without `blocks`.
 *
 * @example Every second block of a GPT
 * ```ts
 * import assert from "node:assert/strict";
 * import { nn, parallel } from "../../mod.ts";
 * const gpt = new nn.GPT({ vocabSize: 16, blockSize: 8, nLayer: 4, nHead: 2, nEmbd: 8 });
 * const names = parallel.applyActivationCheckpointing(gpt, { mode: "selective", every: 2 });
 * assert.deepEqual(names, ["transformer.h.1", "transformer.h.3"]);
 * ```
 */
export function applyActivationCheckpointing(
  model: Module,
  options: ActivationCheckpointOptions,
): string[] {
  const what = "applyActivationCheckpointing";
  if (options === null || typeof options !== "object") {
    throw new TypeError(`${what}: options must be an object with a mode`);
  }
  const { mode, every } = options;
  if (mode !== "full" && mode !== "selective") {
    throw new RangeError(`${what}: mode must be "full" or "selective", got ${mode}`);
  }
  if (mode === "selective" && !(Number.isInteger(every) && every! > 0)) {
    throw new RangeError(`${what}: "selective" needs every: a positive integer, got ${every}`);
  }
  if (mode === "full" && every !== undefined) {
    throw new RangeError(`${what}: every applies to mode "selective" only`);
  }
  const blocks = chooseBlocks(model, options.blocks, what);
  const wrapped: string[] = [];
  blocks.forEach(([name, block], i) => {
    if (mode === "selective" && (i + 1) % every! !== 0) return;
    if ((block as unknown as Record<symbol, unknown>)[WRAPPED]) {
      throw new Error(`${what}: block ${name} is already activation-checkpointed`);
    }
    const forward = block.forward.bind(block);
    Object.defineProperties(block, {
      [WRAPPED]: { value: true, enumerable: false, configurable: true },
      forward: {
        value: (...inputs: unknown[]) => checkpoint(forward, ...inputs),
        enumerable: false,
        configurable: true,
        writable: true,
      },
    });
    wrapped.push(name);
  });
  return wrapped;
}

/** The blocks, with their dotted names, in the model's order. */
function chooseBlocks(
  model: Module,
  blocks: ActivationCheckpointOptions["blocks"],
  what: string,
): [string, Module][] {
  const all = [...model.namedModules()];
  if (blocks === undefined) {
    if (!(model instanceof GPT)) {
      throw new TypeError(
        `${what}: a ${model.constructor.name} is not an nn.GPT; say which submodules are the ` +
          "blocks with the blocks option (names or a predicate)",
      );
    }
    return [...model.transformer.h.namedChildren()].map(([n, m]) => [`transformer.h.${n}`, m]);
  }
  if (typeof blocks === "function") {
    const chosen = all.filter(([n, m]) => blocks(n, m));
    if (chosen.length === 0) throw new Error(`${what}: the blocks predicate chose no module`);
    return chosen;
  }
  if (!Array.isArray(blocks) || blocks.length === 0) {
    throw new TypeError(`${what}: blocks must be a non-empty list of names or a predicate`);
  }
  const byName = new Map(all);
  return blocks.map((name) => {
    const m = byName.get(name);
    if (m === undefined) throw new Error(`${what}: the model has no submodule "${name}"`);
    return [name, m];
  });
}
