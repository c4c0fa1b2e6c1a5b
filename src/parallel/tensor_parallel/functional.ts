/**
 * Differentiable collectives for tensor parallelism (the autograd semantics of PyTorch's
 * `_functional_collectives` and Megatron's mappings): each is a forward collective paired with its
 * adjoint in backward, over the group's blocking collectives (forward and backward are
 * synchronous in dtrain). Every rank of the group must call the same ones in the same order.
 *
 * Which one a boundary needs depends on the gradient that arrives: a tensor consumed by a
 * tensor-parallel computation (a column-parallel Linear's input) gets a partial gradient on each
 * rank, which must be summed; a tensor consumed by a computation every rank repeats (the loss
 * over gathered logits) gets the whole gradient on each rank, which is only sliced.
 * @module
 */

import type { ProcessGroup } from "../../distributed/process_group.ts";
import { record } from "../../tensor/autograd.ts";
import type { Tensor } from "../../tensor/tensor.ts";
import { allReduced, chunkOf, gatheredAlong, reduceScattered } from "./_comm.ts";

/**
 * Forward: the sum over the group; backward: the gradient unchanged (Megatron's
 * `reduce_from_tensor_model_parallel_region`: a row-parallel Linear's partial outputs).
 *
 * @example On a group of one, the identity
 * ```ts
 * import assert from "node:assert/strict";
 * import { dist, parallel, tensor } from "../../../mod.ts";
 * await dist.initProcessGroup({ initMethod: "tcp://127.0.0.1:0", rank: 0, worldSize: 1 });
 * const y = parallel.allReduceIdentity(tensor([1, 2]), dist.worldGroup("example"));
 * assert.deepEqual(Array.from(y.toArray()), [1, 2]);
 * await dist.destroyProcessGroup();
 * ```
 */
export function allReduceIdentity(x: Tensor, group: ProcessGroup): Tensor {
  return record(allReduced(group, x), "AllReduceIdentityBackward", [x], (g) => [g.clone()], [], []);
}

/**
 * Forward: the tensor unchanged; backward: the gradient summed over the group (Megatron's
 * `copy_to_tensor_model_parallel_region`: a replicated input of a column-parallel Linear, or a
 * replicated parameter used on this rank's part of the sequence).
 */
export function identityAllReduce(x: Tensor, group: ProcessGroup): Tensor {
  return record(
    x.detach(),
    "IdentityAllReduceBackward",
    [x],
    (g) => [allReduced(group, g)],
    [],
    [],
  );
}

/**
 * Forward: every rank's tensor concatenated along `dim`; backward: the gradient summed over the
 * group, this rank's chunk kept (a reduce-scatter: the gathered tensor feeds a tensor-parallel
 * computation, as sequence parallelism's gather before a column-parallel Linear).
 */
export function allGatherReduceScatter(x: Tensor, dim: number, group: ProcessGroup): Tensor {
  const what = "allGatherReduceScatter";
  return record(
    gatheredAlong(group, x, dim),
    "AllGatherReduceScatterBackward",
    [x],
    (g) => [reduceScattered(group, g, dim, what)],
    [],
    [],
  );
}

/**
 * Forward: the sum over the group, this rank's chunk along `dim` kept (a reduce-scatter);
 * backward: every rank's gradient gathered along `dim` (a row-parallel Linear's partial outputs
 * into sequence-sharded activations).
 */
export function reduceScatterAllGather(x: Tensor, dim: number, group: ProcessGroup): Tensor {
  const what = "reduceScatterAllGather";
  return record(
    reduceScattered(group, x, dim, what),
    "ReduceScatterAllGatherBackward",
    [x],
    (g) => [gatheredAlong(group, g, dim)],
    [],
    [],
  );
}

/**
 * Forward: every rank's tensor concatenated along `dim`; backward: this rank's chunk of the
 * gradient (the gathered tensor feeds a computation every rank repeats: Megatron's
 * `gather_from_tensor_model_parallel_region`, DTensor's Shard to Replicate).
 */
export function allGatherSplit(x: Tensor, dim: number, group: ProcessGroup): Tensor {
  const what = "allGatherSplit";
  return record(
    gatheredAlong(group, x, dim),
    "AllGatherSplitBackward",
    [x],
    (g) => [chunkOf(group, g, dim, what)],
    [],
    [],
  );
}

/**
 * Forward: this rank's chunk along `dim`; backward: every rank's gradient gathered along `dim`
 * (Megatron's `scatter_to_sequence_parallel_region`, DTensor's Replicate to Shard).
 */
export function splitAllGather(x: Tensor, dim: number, group: ProcessGroup): Tensor {
  return record(
    chunkOf(group, x, dim, "splitAllGather"),
    "SplitAllGatherBackward",
    [x],
    (g) => [gatheredAlong(group, g, dim)],
    [],
    [],
  );
}
