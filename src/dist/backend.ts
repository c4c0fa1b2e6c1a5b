/**
 * The interface a communication backend implements (Gloo on CPU now, NCCL on GPU later).
 * Backends work on raw native buffers and trust their caller: the process group validates
 * arguments and orders calls, so a backend only moves bytes and reports failures.
 * @module
 */

/** Element types collectives accept. */
export type DType = "f32" | "i32";

/** Reductions; `avg` is defined for f32 only. */
export type ReduceOp = "sum" | "avg" | "min" | "max" | "prod";

/** Every reduce op, in the order of the native codes. */
export const REDUCE_OPS: readonly ReduceOp[] = ["sum", "avg", "min", "max", "prod"];

/** Contiguous native memory of `count` elements of `dtype`, starting at `ptr`. */
export interface NativeBuffer {
  /** Address of the first element (null only when count is 0). */
  ptr: Deno.PointerValue;
  /** Number of elements. */
  count: number;
  /** Element type. */
  dtype: DType;
}

/** Where a backend finds the rendezvous store and how it binds its own connections. */
export interface BackendInit {
  /** This process's rank within the group. */
  rank: number;
  /** Number of ranks in the group. */
  size: number;
  /** Job rank of each group rank, so that errors name the ranks users know. */
  globalRanks: readonly number[];
  /** Store host. */
  storeHost: string;
  /** Store port. */
  storePort: number;
  /** The job's shared secret for the store. */
  token: string;
  /** Store key prefix that keeps this group's rendezvous apart from others'. */
  prefix: string;
  /** Host name or address to bind the backend's sockets to. */
  host: string;
  /** Network interface to bind to instead of `host` (empty: use `host`). */
  iface: string;
  /** Bound on the rendezvous and on every collective, in milliseconds. */
  timeoutMs: number;
}

/**
 * A connected communicator over `size` ranks. Calls must be issued in the same order on
 * every rank and never concurrently; the process group guarantees both. Buffers must stay
 * alive and untouched until the returned promise settles.
 */
export interface Backend {
  /** The backend's name, e.g. "gloo". */
  readonly name: string;
  /** In place: every rank ends with the reduction of all ranks' `buf`. */
  allReduce(buf: NativeBuffer, op: ReduceOp): Promise<void>;
  /** In place: every rank ends with `root`'s `buf`. */
  broadcast(buf: NativeBuffer, root: number): Promise<void>;
  /** `outs` is one flat buffer of size × input.count elements, or one buffer per rank. */
  allGather(outs: NativeBuffer[], input: NativeBuffer): Promise<void>;
  /** `allGather` on the calling thread, returning when done; throws DistError (optional). */
  allGatherBlocking?(outs: NativeBuffer[], input: NativeBuffer): void;
  /** Rank r receives chunk r (of out.count elements) of the reduction of every `input`. */
  reduceScatter(out: NativeBuffer, input: NativeBuffer, op: ReduceOp): Promise<void>;
  /** Resolves once every rank has called it. */
  barrier(): Promise<void>;
  /** Releases native resources. Idempotent; no call may be in flight. */
  close(): void;
}
