/**
 * The base every communicator extends: the collectives all backends have are abstract, and each
 * call a backend may lack throws the error its row of the table (backends.ts) would give, so that
 * `Backend`'s methods are all required and no caller asserts one exists.
 * @module
 */

import type {
  Backend,
  Done,
  DType,
  NativeBuffer,
  P2PMessage,
  PostedP2P,
  ReduceOp,
  SharedBlock,
  StartedCollective,
} from "./backend.ts";
import { type Capability, lacks } from "./capabilities.ts";

/**
 * A communicator: override what its row's capabilities promise; the rest throws DistError
 * "invalid" naming the backend and what it has no way to do (the process group checks the row
 * first, so only a caller going around it ever sees these).
 */
export abstract class BaseBackend implements Backend {
  /** The backend's name: its row in backends.ts. */
  abstract readonly name: string;
  /** In place: every rank ends with the reduction of all ranks' `buf`. */
  abstract allReduce(buf: NativeBuffer, op: ReduceOp): Promise<Done>;
  /** In place: every rank ends with `root`'s `buf`. */
  abstract broadcast(buf: NativeBuffer, root: number): Promise<Done>;
  /** `outs` is one flat buffer of size × input.count elements, or one buffer per rank. */
  abstract allGather(outs: NativeBuffer[], input: NativeBuffer): Promise<Done>;
  /** Resolves once every rank has called it. */
  abstract barrier(): Promise<Done>;
  /** Releases native resources. Idempotent; no call may be in flight. */
  abstract close(): void;

  #lacks(what: string, capability: Capability): never {
    throw lacks(what, this.name, capability);
  }

  /** `allReduce` on the calling thread; this backend has none. */
  allReduceBlocking(_buf: NativeBuffer, _op: ReduceOp): Done {
    this.#lacks("allReduceBlocking", "allReduceBlocking");
  }

  /** `allGather` on the calling thread; this backend has none. */
  allGatherBlocking(_outs: NativeBuffer[], _input: NativeBuffer): Done {
    this.#lacks("allGatherBlocking", "allGatherBlocking");
  }

  /** `allGather` started on a native thread of its own; this backend has none. */
  allGatherStart(_outs: NativeBuffer[], _input: NativeBuffer): StartedCollective {
    this.#lacks("allGatherStart", "allGatherStart");
  }

  /** The reduce-scatter; this backend has none. */
  reduceScatter(_out: NativeBuffer, _input: NativeBuffer, _op: ReduceOp): Promise<Done> {
    return Promise.reject(lacks("reduceScatter", this.name, "reduceScatter"));
  }

  /** `reduceScatter` on the calling thread; this backend has none. */
  reduceScatterBlocking(_out: NativeBuffer, _input: NativeBuffer, _op: ReduceOp): Done {
    this.#lacks("reduceScatterBlocking", "reduceScatterBlocking");
  }

  /** Memory every rank maps; this backend has none. */
  allocShared(_count: number, _dtype: DType): Promise<SharedBlock> {
    return Promise.reject(lacks("allocShared", this.name, "allocShared"));
  }

  /** A point-to-point message; this backend has none. */
  postP2P(_message: P2PMessage): PostedP2P {
    this.#lacks("postP2P", "sendRecv");
  }
}
