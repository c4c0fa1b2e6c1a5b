/**
 * DDP's handling of parameters that get no gradient in a step (`findUnusedParameters`).
 *
 * [Note: unused parameters]
 * With `findUnusedParameters`, a parameter whose hook did not fire contributes its gradient as it
 * stands (zero if it has none) so that its bucket can be reduced. Each rank also all-reduces a
 * small i32 mask of the parameters it used since the last synchronised backward (passes without
 * synchronisation included), after the buckets, as PyTorch's Reducer does. A parameter that no
 * rank used and that had no gradient gets `.grad = null` again, so optimizers skip it (no weight
 * decay, no momentum) exactly as they would in one process.
 * @module
 */

import type { ProcessGroup, Work } from "../distributed/mod.ts";
import { tensor } from "../tensor/creation.ts";
import type { Tensor } from "../tensor/tensor.ts";
import { adoptBucketView, type Bucket } from "./_buckets.ts";
import { smallTensorDevice } from "./_verify.ts";

/**
 * Marks ready the bucket slots of parameters whose hook did not fire in this backward: with
 * `findUnusedParameters` each takes its gradient as it stands (zero if none), else an error.
 *
 * @param buckets Every bucket, in index order.
 * @param ready The parameters ready in each bucket; completed in place.
 * @param findUnusedParameters Whether unused parameters are allowed.
 * @returns The unused parameters that had no gradient.
 */
export function adoptUnused(
  buckets: readonly Bucket[],
  ready: Set<Tensor>[],
  findUnusedParameters: boolean,
): Set<Tensor> {
  const unused = buckets.flatMap((bucket) =>
    bucket.slots.filter((s) => !ready[bucket.index].has(s.param)).map((slot) => ({ bucket, slot }))
  );
  const gradless = new Set<Tensor>();
  if (unused.length === 0) return gradless;
  if (!findUnusedParameters) {
    throw new Error(
      "DistributedDataParallel: parameters received no gradient in this backward: " +
        `${unused.map(({ slot }) => slot.name).join(", ")}. Pass { findUnusedParameters: true } ` +
        "if some parameters are legitimately unused in a step.",
    );
  }
  for (const { bucket, slot } of unused) {
    const grad = slot.param.grad;
    if (grad === null || grad.disposed) gradless.add(slot.param);
    adoptBucketView(slot);
    ready[bucket.index].add(slot.param);
  }
  return gradless;
}

/**
 * Issues the all-reduce of how many ranks used each parameter.
 *
 * @param params The parameters in bucket order (the same on every rank).
 * @param used Those this rank used since the last synchronised backward.
 * @param group The DDP group.
 * @returns The mask (the caller disposes it) and the all-reduce's Work.
 */
export function reduceUsedMask(
  params: readonly Tensor[],
  used: ReadonlySet<Tensor>,
  group: ProcessGroup,
): { mask: Tensor; work: Work } {
  const flags = Int32Array.from(params, (p) => used.has(p) ? 1 : 0);
  // Where the group reaches: host memory, or the model's device on a device-only group.
  const mask = tensor(flags, [flags.length], { device: smallTensorDevice(group, params) });
  return { mask, work: group.allReduce(mask, "sum") };
}

/**
 * Gives `.grad = null` back to the gradless parameters that no rank used.
 *
 * @param params The parameters in the mask's order.
 * @param usedCounts The reduced mask: how many ranks used each parameter.
 * @param gradless The parameters that had no gradient (from {@linkcode adoptUnused}).
 */
export function dropGloballyUnused(
  params: readonly Tensor[],
  usedCounts: ArrayLike<number>,
  gradless: ReadonlySet<Tensor>,
): void {
  params.forEach((p, i) => {
    if (usedCounts[i] === 0 && gradless.has(p)) p.grad = null;
  });
}
