/**
 * Checkpoints: named tensors saved to and loaded from safetensors files that PyTorch reads and
 * writes too (`safetensors.torch.save_file` / `load_file`), with `save` / `load`; and nested
 * objects (a `torch.save`-style dict of state dicts, numbers and strings) in one such file, with
 * `saveObject` / `loadObject`. Saves are atomic; loads check every field of the file before
 * trusting it.
 *
 * @example Save a state dict and load it back
 * ```ts
 * import assert from "node:assert/strict";
 * import { load, save } from "./mod.ts";
 * import { tensor } from "../../mod.ts";
 * const dir = Deno.makeTempDirSync();
 * save(`${dir}/step_100.safetensors`, { "0.bias": tensor([0.5, -0.5]) }, { step: "100" });
 * const { tensors, metadata } = load(`${dir}/step_100.safetensors`);
 * assert.deepEqual(tensors["0.bias"].toArray(), Float32Array.of(0.5, -0.5));
 * assert.equal(metadata.step, "100");
 * Deno.removeSync(dir, { recursive: true });
 * ```
 * @module
 */

export * from "../safetensors/mod.ts";
export * from "./object.ts";
export * from "./sharded.ts";
export * from "./sharded_save.ts";
