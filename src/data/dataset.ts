/**
 * What a data loader reads: a sized collection of samples, with an optional fast path that writes a
 * whole batch straight into contiguous native tensors.
 * @module
 */

import type { Tensor } from "../tensor/tensor.ts";

/** One sample: a tensor, or a tuple of tensors (fields such as input and target). */
export type Sample = Tensor | readonly Tensor[];

/** Anything with a number of items: a dataset, or what a sampler draws indices for. */
export interface Sized {
  /** The number of items. */
  readonly length: number;
}

/**
 * A map-style dataset (PyTorch's `torch.utils.data.Dataset`): `length` samples, read by index.
 *
 * Datasets that can collate a batch themselves also implement `getBatch`, which the `DataLoader`
 * prefers over stacking `get` results: one native gather per field, no per-sample tensors.
 *
 * @example A dataset of squares
 * ```ts
 * import assert from "node:assert/strict";
 * import { tensor } from "../../mod.ts";
 * import { DataLoader, type Dataset } from "./mod.ts";
 * const squares: Dataset = {
 *   length: 4,
 *   get: (i) => [tensor([i]), tensor([i * i])],
 * };
 * const seen: number[][] = [];
 * for (const [x, y] of new DataLoader(squares, { batchSize: 2 })) {
 *   assert.deepEqual(x.shape, [2, 1]);
 *   assert.deepEqual(y.shape, [2, 1]);
 *   seen.push([...x.toArray()], [...y.toArray()]);
 * }
 * assert.deepEqual(seen, [[0, 1], [0, 1], [2, 3], [4, 9]]);
 * ```
 */
export interface Dataset<T extends Sample = Sample> extends Sized {
  /**
   * The sample at `index`, as tensors the caller owns (new tensors or views): the loader disposes
   * them after copying, except tensors marked `persistent`.
   */
  get(index: number): T;
  /**
   * Optional: the samples at `indices` collated into one contiguous tensor per field, each with
   * the batch as its first dimension. The indices are not kept after the call returns.
   */
  getBatch?(indices: Int32Array): Tensor[];
}

/**
 * Throws a RangeError naming `what` unless `index` is an integer in [0, length).
 *
 * @param what The dataset's name, for the message.
 * @param index The index asked for.
 * @param length The number of samples.
 */
export function checkIndex(what: string, index: number, length: number): void {
  if (!Number.isInteger(index) || index < 0 || index >= length) {
    throw new RangeError(`${what}: index ${index} is out of range for ${length} samples`);
  }
}
