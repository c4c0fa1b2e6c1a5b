/**
 * Saving and loading named tensors in the safetensors format, so that checkpoints move between
 * dtrain and PyTorch (`safetensors.torch.save_file` / `load_file`) unchanged. The header rules are
 * in `_header.ts` (see [Note: safetensors layout]); this file moves the bytes.
 * @module
 */

import { copyInto, Tensor } from "../tensor/tensor.ts";
import type { DType } from "../tensor/dtype.ts";
import { TensorFile } from "./_tensor_file.ts";
import { saveBytes, type TensorBytes } from "./_writer.ts";
import { CheckpointError } from "./errors.ts";

/** What `load` returns: the tensors by name, and the file's `__metadata__`. */
export interface Checkpoint {
  /** The tensors, in data order, each a new contiguous tensor owned by the caller. */
  tensors: Record<string, Tensor>;
  /** The string-to-string `__metadata__` map; `{}` when the file has none. */
  metadata: Record<string, string>;
}

/**
 * Calls `write` with the address of `t`'s row-major bytes in host memory: its own memory when it
 * is contiguous there, else a host copy (of a strided view, of a GPU tensor) freed afterwards;
 * null for an empty tensor.
 * @ignore dtrain-internal
 */
export function withHostBytes(t: Tensor, write: (ptr: Deno.PointerObject | null) => void): void {
  const inPlace = t.isContiguous() && t.storage.backend.isHostMemory;
  const source = inPlace ? t : Tensor.empty(t.shape, t.dtype);
  try {
    if (source !== t) copyInto(source, t);
    write(t.numel() === 0 ? null : source.ptr);
  } finally {
    if (source !== t) source.dispose();
  }
}

/**
 * Saves tensors to a safetensors file, atomically: the file is written under a temporary name in
 * the same folder, synced, and renamed over `path`, so a crash or an error leaves any previous
 * file intact. Non-contiguous tensors are written row-major; bf16 and f16 ones as their bits
 * (BF16, F16), as PyTorch's `save_file` writes torch.bfloat16 and torch.float16. The layout is the reference
 * implementation's, so PyTorch's `safetensors.torch.load_file` reads the result, and a file from
 * PyTorch's `save_file` is reproduced byte for byte.
 *
 * @param path The file to create or replace (conventionally `*.safetensors`).
 * @param tensors The tensors by name, e.g. a module's state dict (`"0.weight"` of shape [out, in]).
 * @param metadata Free-form strings stored as `__metadata__` (PyTorch writes `{format: "pt"}`);
 * none are written when omitted.
 * @throws CheckpointError when a value is not a live tensor (one on a GPU is written through a host
 * copy), a name is `__metadata__`, or a
 * metadata value is not a string, before anything is written; the file system's errors as they are.
 *
 * @example Save a state dict and read it back
 * ```ts
 * import assert from "node:assert/strict";
 * import { load, save } from "./mod.ts";
 * import { tensor } from "../../mod.ts";
 * const dir = Deno.makeTempDirSync();
 * const weight = tensor([[1, 2, 3], [4, 5, 6]]);
 * save(`${dir}/model.safetensors`, { "0.weight": weight }, { format: "pt" });
 * const { tensors, metadata } = load(`${dir}/model.safetensors`);
 * assert.deepEqual(tensors["0.weight"].shape, [2, 3]);
 * assert.deepEqual(tensors["0.weight"].toArray(), Float32Array.of(1, 2, 3, 4, 5, 6));
 * assert.equal(metadata.format, "pt");
 * Deno.removeSync(dir, { recursive: true });
 * ```
 */
export function save(
  path: string,
  tensors: Record<string, Tensor>,
  metadata?: Record<string, string>,
): void {
  const refuse = (problem: string): never => {
    throw new CheckpointError(path, `cannot save: ${problem}`);
  };
  const named = Object.entries(tensors);
  for (const [name, t] of named) {
    const what = `tensor ${JSON.stringify(name)}`;
    if (!(t instanceof Tensor)) refuse(`${JSON.stringify(name)} is not a Tensor`);
    if (name === "__metadata__") refuse(`"__metadata__" is reserved and cannot name a tensor`);
    if (t.disposed) refuse(`${what} ${JSON.stringify(t.shape)} ${t.dtype} was disposed`);
    if (t.dtype === "bool") {
      refuse(`${what} is bool; dtrain stores F32, BF16, F16, I32 and U16 (convert it first)`);
    }
  }
  for (const [key, value] of Object.entries(metadata ?? {})) {
    if (typeof value !== "string") {
      refuse(`metadata ${JSON.stringify(key)} is ${typeof value}, not a string`);
    }
  }
  const sources = named.map(([name, t]): TensorBytes => ({
    name,
    dtype: t.dtype,
    shape: t.shape,
    withBytes: (write) => withHostBytes(t, write),
  }));
  saveBytes(path, sources, metadata);
}

/** A safetensors file's header: what {@linkcode load} would allocate, read without the data. */
export interface SafetensorsHeader {
  /** Each tensor's dtype and shape, in data order. */
  tensors: Record<string, { dtype: DType; shape: readonly number[] }>;
  /** The string-to-string `__metadata__` map; `{}` when the file has none. */
  metadata: Record<string, string>;
}

/**
 * Reads a safetensors file's header only, checked as {@linkcode load} checks it, so that a
 * caller can compare the shapes with what it expects before allocating anything.
 *
 * @param path The file to read.
 * @returns Each tensor's dtype and shape, and the metadata.
 * @throws CheckpointError naming the file and what is wrong with it (a directory or other
 * non-file included); the file system's errors (such as `Deno.errors.NotFound`) as they are.
 *
 * @example The shapes of a checkpoint made by PyTorch
 * ```ts
 * import assert from "node:assert/strict";
 * import { fileURLToPath } from "node:url";
 * import { readHeader } from "./mod.ts";
 * const url = new URL("../../tests/fixtures/mlp_torch.safetensors", import.meta.url);
 * const { tensors } = readHeader(fileURLToPath(url));
 * assert.deepEqual(tensors["0.weight"], { dtype: "f32", shape: [16, 8] });
 * ```
 */
export function readHeader(path: string): SafetensorsHeader {
  using file = TensorFile.open(path);
  const { entries, metadata } = file;
  const tensors = Object.fromEntries(
    entries.map(({ name, dtype, shape }) => [name, { dtype, shape }]),
  );
  return { tensors, metadata };
}

/**
 * Loads a safetensors file. Every field of the header is checked against the file before any
 * data is trusted: header length, JSON shape, dtype (F32, BF16, F16, I32 or U16), shape, and data
 * offsets that must match each tensor's size and tile the data region exactly. Tensor data is
 * read straight into native memory, its bits unchanged: a BF16 or F16 tensor loads as a bf16 or f16 one
 * (`copy_` it into an f32 tensor, or `loadStateDict` it into a module, to convert it).
 *
 * @param path The file to read.
 * @returns The tensors by name (new contiguous CPU tensors) and the metadata.
 * @throws CheckpointError naming the file and what is wrong with it (a directory or other
 * non-file included); the file system's errors (such as `Deno.errors.NotFound`) as they are.
 *
 * @example Load a checkpoint made by PyTorch
 * ```ts
 * import assert from "node:assert/strict";
 * import { fileURLToPath } from "node:url";
 * import { load } from "./mod.ts";
 * const url = new URL("../../tests/fixtures/mlp_torch.safetensors", import.meta.url);
 * const { tensors } = load(fileURLToPath(url));
 * assert.deepEqual(tensors["0.weight"].shape, [16, 8]); // [out, in], as in PyTorch
 * ```
 */
export function load(path: string): Checkpoint {
  using file = TensorFile.open(path);
  const loaded: [string, Tensor][] = [];
  try {
    // The entries tile the data region in offset order, so one sequential pass reads them all.
    for (const entry of file.entries) {
      const t = Tensor.empty(entry.shape, entry.dtype);
      loaded.push([entry.name, t]);
      if (t.numel() > 0) file.readInto(entry, 0, t.ptr!, entry.end - entry.begin);
    }
  } catch (error) {
    for (const [, t] of loaded) t.dispose();
    throw error;
  }
  return { tensors: Object.fromEntries(loaded), metadata: file.metadata };
}
