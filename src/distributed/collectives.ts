/**
 * The collectives as free functions over a group (default: the world), like
 * `torch.distributed.all_reduce`. Each returns a Work to await; see ProcessGroup.
 * @module
 */

import type { ReduceOp } from "./backend.ts";
import { worldGroup } from "./init.ts";
import type { TensorLike } from "./backend.ts";
import { DistError } from "./errors.ts";
import { ProcessGroup } from "./process_group.ts";
import type { Work } from "./work.ts";

/**
 * `group`, or the world when it is undefined. Anything else is refused by name: a JavaScript
 * caller that passes PyTorch-style keywords (`{ group }`) would otherwise meet "allReduce is not
 * a function" deep inside.
 * @ignore dtrain-internal
 */
export function groupOrWorld(group: ProcessGroup | undefined, what: string): ProcessGroup {
  if (group === undefined) return worldGroup(what);
  if (group instanceof ProcessGroup) return group;
  const got = group === null ? "null" : Object(group).constructor?.name ?? typeof group;
  throw new DistError(
    "invalid",
    `${what}: group must be a ProcessGroup (from newGroup, or a DeviceMesh's getGroup()), got ` +
      `${got}; it is a positional argument, as in ${what}(t, ..., group)`,
  );
}

/**
 * Reduces `t` in place across `group`.
 *
 * @param t The tensor; every rank passes the same dtype and length.
 * @param op The reduction (default "sum"); "avg" needs a floating-point dtype.
 * @param group The group (default: the world).
 * @returns The collective in flight.
 * @throws DistError "invalid" for bad arguments or before initProcessGroup.
 *
 * @example Sum a gradient across ranks
 * ```ts
 * import assert from "node:assert/strict";
 * import { tensor } from "../../mod.ts";
 * import { allReduce, destroyProcessGroup, initProcessGroup } from "./mod.ts";
 * // A world of one process; under the launcher every rank runs the same lines.
 * await initProcessGroup({ initMethod: "tcp://127.0.0.1:0", rank: 0, worldSize: 1 });
 * const grad = tensor([1, 2, 3]);
 * await allReduce(grad); // the sum over ranks, here of one
 * assert.deepEqual(grad.toArray(), Float32Array.of(1, 2, 3));
 * await destroyProcessGroup();
 * ```
 */
export function allReduce(t: TensorLike, op: ReduceOp = "sum", group?: ProcessGroup): Work {
  return groupOrWorld(group, "allReduce").allReduce(t, op);
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
 * ```ts
 * import assert from "node:assert/strict";
 * import { tensor } from "../../mod.ts";
 * import { broadcast, destroyProcessGroup, initProcessGroup } from "./mod.ts";
 * // A world of one process; under the launcher every rank runs the same lines.
 * await initProcessGroup({ initMethod: "tcp://127.0.0.1:0", rank: 0, worldSize: 1 });
 * const weight = tensor([0.5, -0.5]);
 * await broadcast(weight, 0); // every rank now holds rank 0's values
 * assert.deepEqual(weight.toArray(), Float32Array.of(0.5, -0.5));
 * await destroyProcessGroup();
 * ```
 */
export function broadcast(t: TensorLike, src: number, group?: ProcessGroup): Work {
  return groupOrWorld(group, "broadcast").broadcast(t, src);
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
 * ```ts
 * import assert from "node:assert/strict";
 * import { tensor } from "../../mod.ts";
 * import { allGather, destroyProcessGroup, initProcessGroup } from "./mod.ts";
 * // A world of one process; under the launcher every rank runs the same lines.
 * await initProcessGroup({ initMethod: "tcp://127.0.0.1:0", rank: 0, worldSize: 1 });
 * const shard = tensor([1, 2]);
 * const full = tensor([0, 0]); // world size × shard elements
 * await allGather(full, shard);
 * assert.deepEqual(full.toArray(), Float32Array.of(1, 2));
 * await destroyProcessGroup();
 * ```
 */
export function allGather(
  out: TensorLike | TensorLike[],
  t: TensorLike,
  group?: ProcessGroup,
): Work {
  return groupOrWorld(group, "allGather").allGather(out, t);
}

/**
 * Reduces `input` across `group`; rank r receives chunk r in `out`.
 *
 * @param out This rank's chunk; `input` holds group size × `out` elements.
 * @param input The tensor to reduce; not modified.
 * @param op The reduction (default "sum"); "avg" needs a floating-point dtype.
 * @param group The group (default: the world).
 * @returns The collective in flight.
 * @throws DistError "invalid" for bad arguments or before initProcessGroup.
 *
 * @example Shard a gradient
 * ```ts
 * import assert from "node:assert/strict";
 * import { tensor } from "../../mod.ts";
 * import { reduceScatter, destroyProcessGroup, initProcessGroup } from "./mod.ts";
 * // A world of one process; under the launcher every rank runs the same lines.
 * await initProcessGroup({ initMethod: "tcp://127.0.0.1:0", rank: 0, worldSize: 1 });
 * const grad = tensor([2, 4]); // world size × shard elements
 * const gradShard = tensor([0, 0]);
 * await reduceScatter(gradShard, grad, "avg"); // rank r gets the mean of every rank's chunk r
 * assert.deepEqual(gradShard.toArray(), Float32Array.of(2, 4));
 * await destroyProcessGroup();
 * ```
 */
export function reduceScatter(
  out: TensorLike,
  input: TensorLike,
  op: ReduceOp = "sum",
  group?: ProcessGroup,
): Work {
  return groupOrWorld(group, "reduceScatter").reduceScatter(out, input, op);
}

/**
 * Waits until every rank of `group` reaches its barrier.
 *
 * @param group The group (default: the world).
 * @returns The collective in flight.
 * @throws DistError "invalid" before initProcessGroup.
 *
 * @example Wait for every rank
 * ```ts
 * import assert from "node:assert/strict";
 * import { barrier, destroyProcessGroup, initProcessGroup } from "./mod.ts";
 * await initProcessGroup({ initMethod: "tcp://127.0.0.1:0", rank: 0, worldSize: 1 });
 * assert.equal(await barrier(), undefined); // resolves once every rank has called it
 * await destroyProcessGroup();
 * ```
 */
export function barrier(group?: ProcessGroup): Work {
  return groupOrWorld(group, "barrier").barrier();
}
