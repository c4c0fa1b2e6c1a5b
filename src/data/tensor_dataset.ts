/**
 * `TensorDataset`: samples are rows of tensors that share their first dimension, and a batch is
 * one native row gather per tensor.
 * @module
 */

import { keep } from "../tensor/scope.ts";
import { formatShape, itemSize, shapeSize, Tensor } from "../tensor/tensor.ts";
import { checkIndex, type Dataset } from "./dataset.ts";

/**
 * A dataset of the rows of `tensors` (PyTorch's `TensorDataset`): sample i is `[t[i] for t in
 * tensors]`. `get` returns views; `getBatch` gathers rows into new contiguous tensors.
 *
 * The dataset reads the given tensors in place (non-contiguous ones are copied once), so they must
 * stay alive while it is used.
 *
 * @example Batches of inputs and labels
 * ```ts
 * import assert from "node:assert/strict";
 * import { tensor } from "../../mod.ts";
 * import { DataLoader, TensorDataset } from "./mod.ts";
 * const x = tensor([[0, 0], [0, 1], [1, 0], [1, 1]]);
 * const y = tensor([0, 1, 1, 0], [4], { dtype: "i32" });
 * const loader = new DataLoader(new TensorDataset(x, y), { batchSize: 2, shuffle: true });
 * for (const [xb, yb] of loader) {
 *   assert.deepEqual(xb.shape, [2, 2]);
 *   assert.deepEqual(yb.shape, [2]);
 *   const [a, b] = [xb.toArray(), yb.toArray()];
 *   assert.deepEqual([...b], [a[0] ^ a[1], a[2] ^ a[3]]); // shuffled rows keep their labels
 * }
 * ```
 */
export class TensorDataset implements Dataset<Tensor[]> {
  /** The tensors whose rows are the samples (contiguous). */
  readonly tensors: readonly Tensor[];

  /**
   * Creates a `TensorDataset`.
   *
   * @param tensors Tensors of at least one dimension, all with the same first dimension.
   */
  constructor(...tensors: Tensor[]) {
    if (tensors.length === 0) throw new RangeError("TensorDataset: needs at least one tensor");
    tensors.forEach((t, i) => {
      if (t.ndim === 0) {
        throw new RangeError(`TensorDataset: tensor ${i} is a scalar; samples are rows`);
      }
      if (t.shape[0] !== tensors[0].shape[0]) {
        throw new RangeError(
          `TensorDataset: size mismatch between tensors: tensor 0 has ${tensors[0].shape[0]} ` +
            `rows ${formatShape(tensors[0].shape)}, tensor ${i} has ${t.shape[0]} ` +
            formatShape(t.shape),
        );
      }
    });
    this.tensors = tensors.map((t) => t.isContiguous() ? t : keep(contiguousCopy(t)));
  }

  /** The number of rows. */
  get length(): number {
    return this.tensors[0].shape[0];
  }

  /** Row `index` of every tensor, as views. */
  get(index: number): Tensor[] {
    checkIndex("TensorDataset", index, this.length);
    return this.tensors.map((t) => {
      const row = t.shape.slice(1);
      return new Tensor(t.storage, row, t.dtype, undefined, t.offset + index * shapeSize(row));
    });
  }

  /** The rows at `indices` of every tensor, each gathered into a new `[indices.length, ...]` tensor. */
  getBatch(indices: Int32Array): Tensor[] {
    return this.tensors.map((t) => gatherRows(t, indices));
  }
}

/** A contiguous copy of `t` outside the autograd graph. */
function contiguousCopy(t: Tensor): Tensor {
  const detached = t.detach();
  const copy = detached.contiguous();
  detached.dispose();
  return copy;
}

/**
 * Rows `indices` of contiguous `src` gathered into a new contiguous tensor (`dt_gather_rows`).
 *
 * @param src A contiguous tensor of at least one dimension.
 * @param indices Row indices in [0, src.shape[0]).
 * @returns A tensor of shape `[indices.length, ...src.shape.slice(1)]`.
 */
export function gatherRows(src: Tensor, indices: Int32Array): Tensor {
  const row = src.shape.slice(1);
  // On src's device: its kernel reads src there (a GPU's memory is no host memory).
  const out = Tensor.empty([indices.length, ...row], src.dtype, false, src.device);
  if (indices.length > 0) {
    const dev = out.storage.backend;
    dev.check(dev.kernels.gatherRows(
      src.ptr,
      src.shape[0],
      Deno.UnsafePointer.of(indices),
      indices.length,
      shapeSize(row) * itemSize(src.dtype),
      out.ptr,
    ));
  }
  return out;
}
