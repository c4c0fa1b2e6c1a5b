/**
 * A step's batch cut into microbatches along dimension 0, as PyTorch's pipelining cuts its
 * arguments and targets (`torch.tensor_split`: the first `batch mod n` microbatches one row
 * longer).
 * @module
 */

import { split } from "../../tensor/ops/slice.ts";
import type { Tensor } from "../../tensor/tensor.ts";

/**
 * `t` cut into `n` views along dimension 0.
 *
 * @param t The whole batch.
 * @param n The number of microbatches.
 * @param what The argument's name, for the error.
 * @throws RangeError for a 0-d tensor or fewer rows than microbatches.
 */
export function splitMicrobatches(t: Tensor, n: number, what: string): Tensor[] {
  const rows = t.ndim === 0 ? 0 : t.shape[0];
  if (rows < n) {
    throw new RangeError(
      `${what} [${t.shape}] has ${rows} rows on dimension 0, fewer than the ${n} microbatches`,
    );
  }
  const base = Math.floor(rows / n), extra = rows % n;
  return split(t, Array.from({ length: n }, (_, i) => base + (i < extra ? 1 : 0)), 0);
}
