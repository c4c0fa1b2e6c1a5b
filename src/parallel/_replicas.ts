/**
 * What LocalSGD and DiLoCo share: the parameters they keep in step across replicas, the start from
 * equal weights, and the period of their syncs.
 * @module
 */

import { broadcast, type ProcessGroup, worldGroup } from "../distributed/mod.ts";
import type { Module } from "../nn/module.ts";
import type { Parameter } from "../nn/parameter.ts";
import { noGrad } from "../tensor/grad_mode.ts";
import { cat } from "../tensor/ops/indexing.ts";
import type { Tensor } from "../tensor/tensor.ts";

/** The group given, or the world; `what` names the caller in errors. */
export function replicaGroup(group: ProcessGroup | undefined, what: string): ProcessGroup {
  return group ?? worldGroup(what);
}

/**
 * The parameters that train (each once, tied ones included), with their names.
 * @throws Error when there is none: nothing would ever be synchronised.
 */
export function trainableParameters(model: Module, what: string): [string, Parameter][] {
  const named = [...model.namedParameters()].filter(([, p]) => p.requiresGrad);
  if (named.length === 0) {
    throw new Error(`${what}: the model has no parameter that requires a gradient`);
  }
  return named;
}

/** @throws RangeError unless `syncEvery` is an integer of at least 1. */
export function checkSyncEvery(syncEvery: number, what: string): void {
  if (!Number.isInteger(syncEvery) || syncEvery < 1) {
    throw new RangeError(`${what}: syncEvery must be an integer of at least 1, got ${syncEvery}`);
  }
}

/**
 * Copies the group's first rank's parameters to every rank, so that the replicas start from the
 * same weights (as DDP does at creation).
 */
export async function broadcastFromFirst(
  params: readonly Parameter[],
  group: ProcessGroup,
): Promise<void> {
  await Promise.all(params.map((p) => broadcast(p, group.ranks[0], group).wait()));
}

/**
 * The tensors' elements end to end in one f32 tensor: a sync sends one collective, not one per
 * parameter, as every collective pays the link's round trip.
 */
export function flatF32(tensors: readonly Tensor[]): Tensor {
  return noGrad(() => cat(tensors.map((t) => (t.dtype === "f32" ? t : t.to("f32")).reshape(-1))));
}

/** The runs of `flat` that stand for `like`'s tensors, shaped like them (views). */
export function unflatten(flat: Tensor, like: readonly Tensor[]): Tensor[] {
  let start = 0;
  return like.map((t) => {
    const n = t.numel();
    const run = flat.narrow(0, start, n).reshape(t.shape);
    start += n;
    return run;
  });
}
