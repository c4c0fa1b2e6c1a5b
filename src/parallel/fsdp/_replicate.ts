/**
 * HSDP's second collective: once a group's reduce-scatter (within the shard dimension) is done,
 * its output is all-reduced across the replicas (the mesh's dim 0), as FSDP2 does for a 2-D mesh.
 *
 * [Note: replicate all-reduce order]
 * Every rank must issue its collectives on one group in the same order. The reduce-scatters end
 * in whatever order their shard groups finish, which differs between replicas; so each all-reduce
 * is issued only after the previous one on the same replicate group was (a queue per group), in
 * the order the groups' reduce-scatters were issued, which the graph fixes on every rank. The
 * queue orders the issues, not the completions: all-reduces of several groups may be in flight.
 * @module
 */

import { type ProcessGroup, Work } from "../../distributed/mod.ts";
import type { Tensor } from "../../tensor/tensor.ts";

/** The last all-reduce issue queued on each replicate group (settled once it is issued). */
const queues = new WeakMap<ProcessGroup, Promise<void>>();

/**
 * All-reduces `t` (in place) across `replicate` once `first` (the reduce-scatter that fills it)
 * finished, after the all-reduces queued before it on the same group were issued.
 *
 * @returns A Work that settles when the all-reduce did (or rejects with either failure).
 */
export function allReduceAfter(
  replicate: ProcessGroup,
  first: Work,
  t: Tensor,
  op: "avg" | "sum",
): Work {
  const previous = queues.get(replicate) ?? Promise.resolve();
  // Wrapped in an object: a Work is thenable, and resolving with it would wait for its end.
  const issued = Promise.all([previous, first.wait()]).then(() => ({
    work: replicate.allReduce(t, op),
  }));
  queues.set(replicate, issued.then(() => {}, () => {}));
  return new Work(issued.then(({ work }) => work.wait()));
}
