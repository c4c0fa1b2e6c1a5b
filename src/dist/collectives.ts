/**
 * The collectives as free functions over a group (default: the world), like
 * `torch.distributed.all_reduce`. Each returns a Work to await; see ProcessGroup.
 * @module
 */

import type { ReduceOp } from "./backend.ts";
import { worldGroup } from "./init.ts";
import type { ProcessGroup, TensorLike, Work } from "./process_group.ts";

/**
 * Reduces `t` in place across `group`.
 *
 * @param t The tensor; every rank passes the same dtype and length.
 * @param op The reduction (default "sum"); "avg" needs f32.
 * @param group The group (default: the world).
 * @returns The collective in flight.
 * @throws DistError "invalid" for bad arguments or before initProcessGroup.
 *
 * @example Sum a gradient across ranks
 * ```ts ignore
 * await allReduce(grad);
 * ```
 */
export function allReduce(t: TensorLike, op: ReduceOp = "sum", group?: ProcessGroup): Work {
  return (group ?? worldGroup("allReduce")).allReduce(t, op);
}

/**
 * Copies rank `src`'s `t` to every rank of `group`.
 *
 * @param t The tensor, in place.
 * @param src The global rank to copy from.
 * @param group The group (default: the world).
 * @returns The collective in flight.
 * @throws DistError "invalid" for bad arguments or before initProcessGroup.
 *
 * @example Start every rank from rank 0's weights
 * ```ts ignore
 * await broadcast(weight, 0);
 * ```
 */
export function broadcast(t: TensorLike, src: number, group?: ProcessGroup): Work {
  return (group ?? worldGroup("broadcast")).broadcast(t, src);
}

/**
 * Gathers every rank's `t` into `out` on every rank.
 *
 * @param out One tensor per rank, or one flat tensor of group size × `t` elements.
 * @param t This rank's contribution.
 * @param group The group (default: the world).
 * @returns The collective in flight.
 * @throws DistError "invalid" for bad arguments or before initProcessGroup.
 *
 * @example Gather a shard from every rank
 * ```ts ignore
 * await allGather(full, shard);
 * ```
 */
export function allGather(
  out: TensorLike | TensorLike[],
  t: TensorLike,
  group?: ProcessGroup,
): Work {
  return (group ?? worldGroup("allGather")).allGather(out, t);
}

/**
 * Reduces `input` across `group`; rank r receives chunk r in `out`.
 *
 * @param out This rank's chunk; `input` holds group size × `out` elements.
 * @param input The tensor to reduce; not modified.
 * @param op The reduction (default "sum"); "avg" needs f32.
 * @param group The group (default: the world).
 * @returns The collective in flight.
 * @throws DistError "invalid" for bad arguments or before initProcessGroup.
 *
 * @example Shard a gradient
 * ```ts ignore
 * await reduceScatter(gradShard, grad, "avg");
 * ```
 */
export function reduceScatter(
  out: TensorLike,
  input: TensorLike,
  op: ReduceOp = "sum",
  group?: ProcessGroup,
): Work {
  return (group ?? worldGroup("reduceScatter")).reduceScatter(out, input, op);
}

/**
 * Waits until every rank of `group` reaches its barrier.
 *
 * @param group The group (default: the world).
 * @returns The collective in flight.
 * @throws DistError "invalid" before initProcessGroup.
 *
 * @example Wait for every rank
 * ```ts ignore
 * await barrier();
 * ```
 */
export function barrier(group?: ProcessGroup): Work {
  return (group ?? worldGroup("barrier")).barrier();
}
