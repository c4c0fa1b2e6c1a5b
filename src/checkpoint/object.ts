/**
 * `torch.save`-style checkpoints: a nested object of tensors, numbers, strings, booleans, null and
 * arrays in ONE safetensors file that PyTorch's `safetensors.torch.load_file` reads. The tensors are
 * stored under their paths joined with "."; the rest of the object is JSON in `__metadata__`
 * under the key `"dtrain.object"` (see [Note: object checkpoints] in _object_tree.ts).
 *
 * Two pairs of names, one rule: `save` / `load` are safetensors' `save_file` / `load_file` (a flat
 * record of tensors and string metadata, returned as `{ tensors, metadata }`), and
 * `saveObject` / `loadObject` are `torch.save` / `torch.load` (any nested object, returned as it
 * was saved). A single overloaded `save` could not tell `{ "0.weight": t }` meant as a state dict
 * from the same object meant as a checkpoint object, nor could `load` know which of the two
 * return types a caller expects, so the forms have different names.
 * @module
 */

import { localShard } from "../parallel/fsdp/fully_shard.ts";
import { Shard, tensorParallelPlacement } from "../parallel/tensor_parallel/placement.ts";
import type { Tensor } from "../tensor/tensor.ts";
import { flattenObject, unflattenObject } from "./_object_tree.ts";
import { CheckpointError } from "../safetensors/errors.ts";
import { load, save } from "../safetensors/safetensors.ts";

/** The `__metadata__` key under which `saveObject` stores the object's structure as JSON. */
export const OBJECT_METADATA_KEY = "dtrain.object";

/** A value inside a checkpoint object. */
export type CheckpointValue =
  | Tensor
  | number
  | string
  | boolean
  | null
  | CheckpointValue[]
  | { [key: string]: CheckpointValue };

/** A checkpoint object: a plain object at the top, as `torch.save`'s dict. */
export type CheckpointObject = { [key: string]: CheckpointValue };

/**
 * Saves a nested object (PyTorch's `torch.save(checkpoint, path)`) as one safetensors file,
 * atomically as {@linkcode save} does. Each tensor is stored under its path joined with "."
 * (`{ model: { "transformer.wte.weight": t } }` gives `model.transformer.wte.weight`, an optimizer
 * state dict's `state[0].exp_avg` gives `optimizer.state.0.exp_avg`), so that
 * `safetensors.torch.load_file` reads them by those names; everything else goes as JSON to
 * `__metadata__["dtrain.object"]`, keys holding "." included. A tensor found at several paths (tied
 * weights) is stored once, under its first path. Numbers round-trip exactly, NaN, ±Infinity and -0
 * too.
 *
 * @param path The file to create or replace (conventionally `*.safetensors`).
 * @param obj A plain object whose values are tensors, numbers, strings, booleans, null, arrays and
 * plain objects, nested to any depth (an `optimizer.stateDict()` or a module's `stateDict()`).
 * @throws CheckpointError before anything is written, naming the path of the first value that
 * cannot be stored (undefined, a function, a Map, a Set, a Date, a BigInt, a class instance, a
 * typed array, an empty array slot, a cycle, a disposed or bool tensor), two tensors whose
 * paths join to the same name, or a tensor that is one rank's shard of a parallel model's
 * parameter (tensor parallelism, FSDP: save `parallel.fullStateDict(model)` instead); the file
 * system's errors as they are.
 *
 * @example Save a nanoGPT-style checkpoint and read it back
 * ```ts
 * import assert from "node:assert/strict";
 * import { load, loadObject, saveObject } from "./mod.ts";
 * import { nn, optim } from "../../mod.ts";
 * const model = new nn.Linear(3, 2);
 * const optimizer = new optim.AdamW(model.parameters(), { lr: 1e-3 });
 * const dir = Deno.makeTempDirSync();
 * saveObject(`${dir}/ckpt.safetensors`, {
 *   model: model.stateDict(),
 *   optimizer: optimizer.stateDict(),
 *   model_args: { n_layer: 12, bias: false },
 *   iter_num: 5,
 *   best_val_loss: 1.9,
 * });
 * const ckpt = loadObject(`${dir}/ckpt.safetensors`);
 * assert.equal(ckpt.iter_num, 5);
 * assert.deepEqual(ckpt.model_args, { n_layer: 12, bias: false });
 * model.loadStateDict(ckpt.model as nn.StateDict);
 * // As plain safetensors, the tensors are named by their paths.
 * assert.deepEqual(Object.keys(load(`${dir}/ckpt.safetensors`).tensors).sort(), [
 *   "model.bias",
 *   "model.weight",
 * ]);
 * Deno.removeSync(dir, { recursive: true });
 * ```
 */
export function saveObject(path: string, obj: object): void {
  const refuse = (problem: string): never => {
    throw new CheckpointError(path, `cannot save: ${problem}`);
  };
  const { tensors, structure } = flattenObject(obj, refuse);
  for (const [name, t] of tensors) {
    const shard = shardOf(t);
    if (shard !== null) {
      refuse(
        `${name} is ${shard}, not a whole tensor; save parallel.fullStateDict(model) (every ` +
          "rank gathers the whole tensors), or the shards with saveSharded",
      );
    }
  }
  save(path, Object.fromEntries(tensors), { [OBJECT_METADATA_KEY]: JSON.stringify(structure) });
}

/** What part of its full tensor `t` is when a parallel style or FSDP sharded it; null if whole. */
function shardOf(t: Tensor): string | null {
  const tp = tensorParallelPlacement(t);
  if (tp?.placement instanceof Shard) {
    return `this rank's tensor-parallel shard (${tp.placement} of [${tp.fullShape}] over ` +
      `${tp.group.size} ranks)`;
  }
  const fsdp = localShard(t);
  if (!fsdp.sharded) return null;
  return `this rank's FSDP shard (rows ${fsdp.rowStart}..${fsdp.rowStart + fsdp.rows - 1} of ` +
    `[${fsdp.shape}])`;
}

/**
 * Loads a file written by {@linkcode saveObject} (PyTorch's `torch.load(path)`): the object as it
 * was saved, with new contiguous CPU tensors (owned by the caller) in place of the tensors, one
 * tensor object wherever one tensor was saved at several paths. The file is checked as
 * {@linkcode load} checks it, and the structure against its tensors.
 *
 * @param path The file to read.
 * @returns The object. `T` is not checked: it only types the result as the caller knows it.
 * @throws CheckpointError naming the file when it has no `"dtrain.object"` metadata (a plain
 * safetensors file: read it with {@linkcode load}), or when the structure does not fit the
 * tensors; the file system's errors as they are.
 */
export function loadObject<T extends object = CheckpointObject>(path: string): T {
  const { tensors, metadata } = load(path);
  const fail = (problem: string): never => {
    for (const t of Object.values(tensors)) t.dispose();
    throw new CheckpointError(path, problem);
  };
  const text = metadata[OBJECT_METADATA_KEY];
  if (text === undefined) {
    fail(
      `no ${JSON.stringify(OBJECT_METADATA_KEY)} in __metadata__: not written by saveObject ` +
        "(read a plain safetensors file with load())",
    );
  }
  return unflattenObject(text, tensors, fail) as T;
}
