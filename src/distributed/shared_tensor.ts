/**
 * Tensors in memory that every rank of a group maps, after PyTorch's symmetric memory
 * (`torch.distributed._symmetric_memory.empty` followed by `rendezvous`).
 * @module
 */

import { Storage } from "../tensor/storage.ts";
import { Tensor } from "../tensor/tensor.ts";
import { worldGroup } from "./init.ts";
import type { ProcessGroup } from "./process_group.ts";

/** Options of {@linkcode emptyShared}. */
export interface EmptySharedOptions {
  /** Element type (default "f32"). */
  dtype?: "f32" | "i32";
  /** The group whose ranks share the memory (default: the world). */
  group?: ProcessGroup;
}

/**
 * A zero-filled cpu tensor that every rank of the group can read in place, for buffers that
 * collectives touch most (DDP puts its gradient buckets there). Over shared memory an all-reduce
 * of such a tensor reduces every rank's copy where it lies, without staging it: 2.2–3.7× the
 * bandwidth from 1 to 64 MiB (BENCHMARKS.md). Where the group's backend has no shared memory
 * (Gloo, or ranks on several hosts) it is an ordinary zero-filled tensor, so callers need no
 * second path. A collective call: every rank passes the same shape and dtype, in the same order
 * as its other collectives on the group. Over shared memory each rank's part takes room in
 * `/dev/shm`; where there is too little, it throws a DistError "internal" saying so (on every
 * rank alike).
 *
 * @example A gradient-sized buffer every rank reduces in place
 * ```ts
 * import assert from "node:assert/strict";
 * import { dist } from "../../mod.ts";
 * await dist.initProcessGroup({ initMethod: "tcp://127.0.0.1:0", rank: 0, worldSize: 1 });
 * const grads = await dist.emptyShared([4]);
 * grads.fill_(2);
 * await dist.allReduce(grads, "avg");
 * assert.deepEqual([...grads.toArray()], [2, 2, 2, 2]);
 * await dist.destroyProcessGroup();
 * ```
 */
export async function emptyShared(
  shape: readonly number[],
  options: EmptySharedOptions = {},
): Promise<Tensor> {
  const dtype = options.dtype ?? "f32";
  const group = options.group ?? worldGroup("emptyShared");
  const numel = shape.reduce((n, d) => n * d, 1);
  if (!shape.every((d) => Number.isSafeInteger(d) && d >= 0) || !Number.isSafeInteger(numel)) {
    return Tensor.empty(shape, dtype, true); // throws for the bad shape, as Tensor.empty does
  }
  const block = await group.allocShared(numel, dtype);
  if (block === null) return Tensor.empty(shape, dtype, true);
  // The block is its own owner: pinned while its address is in use, unmapped when the last
  // tensor on it is disposed, or once collected (the backend's backstop).
  const storage = new Storage(numel * 4, false, "cpu", {
    ptr: block.ptr,
    owner: block,
    release: () => block.free(),
  });
  return new Tensor(storage, shape, dtype);
}
