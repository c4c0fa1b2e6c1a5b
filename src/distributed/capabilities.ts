/**
 * What a backend can do beyond all-reduce, broadcast, all-gather and barrier, which all have: the
 * `capabilities` of each row of the backend table (backends.ts), and how errors name them.
 * @module
 */

import { DistError } from "./errors.ts";

/**
 * What a backend can do beyond all-reduce, broadcast, all-gather and barrier, which all have.
 */
export interface Capabilities {
  /** `allReduceBlocking`: the all-reduce on the calling thread. */
  readonly allReduceBlocking: boolean;
  /** `allGatherBlocking`: the all-gather on the calling thread. */
  readonly allGatherBlocking: boolean;
  /** `allGatherStart`: the all-gather started on a native thread of its own. */
  readonly allGatherStart: boolean;
  /** `reduceScatter`. */
  readonly reduceScatter: boolean;
  /** `reduceScatterBlocking`: the reduce-scatter on the calling thread. */
  readonly reduceScatterBlocking: boolean;
  /** Point-to-point `send` and `recv`. */
  readonly sendRecv: boolean;
  /** `allocShared`: memory every rank of the group maps. */
  readonly allocShared: boolean;
}

/**
 * One of {@linkcode Capabilities}.
 */
export type Capability = keyof Capabilities;

/** How errors name each capability: "the gloo backend has no blocking all-reduce". */
export const CAPABILITY_NAMES: Readonly<Record<Capability, string>> = {
  allReduceBlocking: "blocking all-reduce",
  allGatherBlocking: "blocking all-gather",
  allGatherStart: "all-gather started on a thread of its own",
  reduceScatter: "reduce-scatter",
  reduceScatterBlocking: "blocking reduce-scatter",
  sendRecv: "point-to-point send/recv",
  allocShared: "shared memory",
};

/**
 * The error for a call a backend cannot make: "the gloo backend has no shared memory".
 *
 * @param what The call that needed it, named first in the message.
 * @param backend The backend's name.
 * @param capability What it lacks.
 * @returns A DistError "invalid".
 */
export function lacks(what: string, backend: string, capability: Capability): DistError {
  return new DistError(
    "invalid",
    `${what}: the ${backend} backend has no ${CAPABILITY_NAMES[capability]}`,
  );
}
