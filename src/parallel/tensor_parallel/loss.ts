/**
 * Cross-entropy over vocabulary-parallel logits (PyTorch's `loss_parallel`): each rank holds the
 * logits of its part of the vocabulary, and the loss and its gradient come from those shards with
 * two small all-reduces (the rows' maximum, then their sum of exponentials with the target's
 * logit), never gathering the [N, vocabulary] logits.
 * @module
 */

import type { ProcessGroup } from "../../distributed/process_group.ts";
import { record } from "../../tensor/autograd.ts";
import { tensor } from "../../tensor/creation.ts";
import { formatShape } from "../../tensor/layout.ts";
import type { Tensor } from "../../tensor/tensor.ts";
import { allReduced } from "./_comm.ts";

/** Options of {@linkcode vocabParallelCrossEntropy}. */
export interface VocabParallelCrossEntropyOptions {
  /** Targets equal to this are left out of the loss and the mean (default -100, as PyTorch). */
  ignoreIndex?: number;
  /** "mean" (default, over the targets not ignored) or "sum". */
  reduction?: "mean" | "sum";
}

/**
 * The cross-entropy of logits split on the vocabulary across `group` (rank r holds columns
 * r·C .. (r+1)·C − 1 of [N, size·C], as a column-parallel `lm_head` leaves them) against
 * the whole targets [N] (i32, the same on every rank): the same value on every rank as
 * `crossEntropy` of the gathered logits, and each rank's gradient is its columns of that one's.
 * Computed on the host in f64 from the f32 logits.
 *
 * @param logits This rank's logits [N, C], f32.
 * @param target Class indices [N] into the whole vocabulary.
 * @param group The tensor-parallel group.
 * @param options See {@linkcode VocabParallelCrossEntropyOptions}.
 * @returns The loss, a 0-d tensor.
 */
export function vocabParallelCrossEntropy(
  logits: Tensor,
  target: Tensor,
  group: ProcessGroup,
  options: VocabParallelCrossEntropyOptions = {},
): Tensor {
  const what = "vocabParallelCrossEntropy";
  const ignoreIndex = options.ignoreIndex ?? -100;
  const reduction = options.reduction ?? "mean";
  if (reduction !== "mean" && reduction !== "sum") {
    throw new RangeError(`${what}: reduction must be "mean" or "sum", got ${reduction}`);
  }
  if (logits.ndim !== 2 || target.ndim !== 1 || target.shape[0] !== logits.shape[0]) {
    throw new RangeError(
      `${what}: expected logits [N, C] and target [N], got ${formatShape(logits.shape)} and ${
        formatShape(target.shape)
      }`,
    );
  }
  if (logits.dtype !== "f32" || target.dtype !== "i32") {
    throw new TypeError(
      `${what}: expected f32 logits and i32 targets, got ${logits.dtype} and ${target.dtype}`,
    );
  }
  const [rows, cols] = logits.shape, start = group.rank * cols, vocab = cols * group.size;
  const x = logits.toArray() as Float32Array, t = target.toArray() as Int32Array;
  const device = logits.device;
  const localMax = new Float32Array(rows).fill(-Infinity);
  for (let i = 0; i < rows; i++) {
    for (let j = 0; j < cols; j++) localMax[i] = Math.max(localMax[i], x[i * cols + j]);
  }
  const maxT = tensor(localMax, [rows], { device });
  const globalMax = allReduced(group, maxT, "max");
  const m = globalMax.toArray() as Float32Array;
  maxT.dispose();
  globalMax.dispose();
  // Per row: the sum of exp(x − max) over this rank's columns, and the target's x − max if the
  // target is one of them; one all-reduce sums both.
  const parts = new Float32Array(2 * rows);
  let count = 0;
  for (let i = 0; i < rows; i++) {
    if (t[i] === ignoreIndex) continue;
    if (t[i] < 0 || t[i] >= vocab) {
      throw new RangeError(`${what}: target ${t[i]} is out of bounds for ${vocab} classes`);
    }
    count++;
    let s = 0;
    for (let j = 0; j < cols; j++) s += Math.exp(x[i * cols + j] - m[i]);
    parts[i] = s;
    const local = t[i] - start;
    if (local >= 0 && local < cols) parts[rows + i] = x[i * cols + local] - m[i];
  }
  const partsT = tensor(parts, [2, rows], { device });
  const summed = allReduced(group, partsT);
  const sums = summed.toArray() as Float32Array;
  partsT.dispose();
  summed.dispose();
  let total = 0;
  for (let i = 0; i < rows; i++) {
    if (t[i] !== ignoreIndex) total += Math.log(sums[i]) - sums[rows + i];
  }
  const scale = reduction === "mean" ? 1 / count : 1;
  const loss = tensor([total * scale], [], { device });
  return record(
    loss,
    "VocabParallelCrossEntropyBackward",
    [logits],
    (gy) => {
      const g = (gy.toArray() as Float32Array)[0] * scale;
      const gx = new Float32Array(rows * cols);
      for (let i = 0; i < rows; i++) {
        if (t[i] === ignoreIndex) continue;
        for (let j = 0; j < cols; j++) {
          const p = Math.exp(x[i * cols + j] - m[i]) / sums[i];
          gx[i * cols + j] = g * (p - (j === t[i] - start ? 1 : 0));
        }
      }
      return [tensor(gx, [rows, cols], { device })];
    },
    [],
    [],
  );
}
