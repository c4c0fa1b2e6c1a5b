/**
 * The interface a communication backend implements (gloo.ts, shm.ts, shm_hierarchical.ts,
 * nccl.ts, emu.ts; what each reaches and can do is its row in backends.ts). Backends work on raw native
 * buffers and trust their caller: the process group validates arguments, checks the table and
 * orders calls, so a backend only moves bytes and reports failures.
 * @module
 */

/** Element types collectives accept. */
export type DType = "f32" | "i32" | "bf16" | "f16";

/** Bytes per element of each collective dtype. */
export const DTYPE_BYTES: Readonly<Record<DType, number>> = { f32: 4, i32: 4, bf16: 2, f16: 2 };

/**
 * The bytes of `count` elements of `dtype`.
 * @ignore dtrain-internal (its module is re-exported with `export *`)
 */
export function nbytes(buf: { count: number; dtype: DType }): number {
  return buf.count * DTYPE_BYTES[buf.dtype];
}

/** Reductions; `avg` is defined for the floating-point dtypes (f32, bf16, f16) only. */
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

/**
 * The addresses of `outs`, as the `void *const *outs` array the native all-gathers take.
 * @ignore dtrain-internal (its module is re-exported with `export *`)
 */
export function pointersOf(outs: NativeBuffer[]): BigUint64Array<ArrayBuffer> {
  return new BigUint64Array(outs.map((o) => BigInt(Deno.UnsafePointer.value(o.ptr))));
}

/**
 * Where a backend finds the rendezvous store and how it binds its own connections.
 * @ignore dtrain-internal (its module is re-exported with `export *`)
 */
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
 * When a collective ran on the backend's own thread, on the timeline's clock (`nowUs` of
 * src/profile/tracer.ts: microseconds since the Unix epoch at process start, advancing
 * monotonically; a native clock is mapped onto it, never the wall clock taken as is). A
 * backend that measures it resolves with it, so that the timeline (src/profile) shows when the
 * bytes moved rather than when JavaScript noticed.
 */
export interface OpTiming {
  /** When the collective started (its turn came). */
  startUs: number;
  /** When it finished. */
  endUs: number;
}

/** What a collective's promise resolves with: nothing, or when it ran. */
export type Done = void | OpTiming;

/**
 * A collective running on a native thread of its own (`Backend.allGatherStart`): the JavaScript
 * thread goes on working, then blocks in `waitBlocking` until the collective has ended.
 */
export interface StartedCollective {
  /**
   * Blocks until the collective has ended and throws its DistError, if any. Calling it again
   * returns or throws the same at once.
   */
  waitBlocking(): void;
}

/**
 * Memory that every rank of a group maps (`Backend.allocShared`): each rank has a part of the
 * same size, and an all-reduce on memory inside this rank's part reduces every rank's part in
 * place, without staging copies.
 */
export interface SharedBlock {
  /** This rank's part. */
  readonly ptr: Deno.PointerValue;
  /** Unmaps this rank's view of the block now; idempotent. No collective may be using it. */
  free(): void;
}

/**
 * One point-to-point message as a backend takes it (src/distributed/p2p.ts has checked it): messages
 * between two ranks match in the order each side posts them, and the receiver checks the
 * sender's dtype, bytes, shape and tag against its own before the payload moves ([Note:
 * point-to-point protocol] in csrc/gloo/p2p_message.h).
 */
export interface P2PMessage {
  /** "send": `buf` goes to `peer`; "recv": `peer`'s message lands in `buf`. */
  kind: "send" | "recv";
  /** The other side, a group rank (never this rank). */
  peer: number;
  /** The tensor's memory. */
  buf: NativeBuffer;
  /** The tag both sides must give, 0 to 2³² − 1. */
  tag: number;
  /** The tensor's shape (up to 8 dimensions are compared; more are compared flat). */
  shape: readonly number[];
}

/**
 * A posted point-to-point message (`Backend.postP2P`): it has its place in the order of its
 * pair, and moves when run, once, with one of the two.
 */
export interface PostedP2P {
  /** Moves the message off the JavaScript thread; rejects with a DistError. */
  run(): Promise<void>;
  /** Moves the message on the calling thread; throws a DistError. */
  runBlocking(): void;
  /**
   * Starts moving the message off the JavaScript thread, for a blocking batch: the returned
   * function blocks until it has moved and throws its DistError. Call it in the same turn.
   */
  start(): () => void;
}

/**
 * A connected communicator over `size` ranks. Calls must be issued in the same order on
 * every rank; the process group guarantees it. Unless the backend's row says it is `queued`
 * (backends.ts), never concurrently either: the process group then issues each call after the
 * previous settled. Buffers must stay alive and untouched until the returned promise settles.
 * Every method is required; one a backend's row says it lacks throws the "backend X has no Y"
 * error, as those of `BaseBackend` (base_backend.ts) do.
 */
export interface Backend {
  /** The backend's name, e.g. "gloo": its row in backends.ts. */
  readonly name: string;
  /**
   * The one device whose memory it reaches (`emu:1`), for a backend bound to this rank's device:
   * the process group refuses tensors on another, whose queued work it would not be ordered after.
   */
  readonly device?: string;
  /** In place: every rank ends with the reduction of all ranks' `buf`. */
  allReduce(buf: NativeBuffer, op: ReduceOp): Promise<Done>;
  /**
   * `allReduce` on the calling thread, returning when done (where the backend's row says it has
   * it); throws DistError. A queued backend runs it after every collective issued before it; on
   * another the process group calls it only with nothing in flight.
   */
  allReduceBlocking(buf: NativeBuffer, op: ReduceOp): Done;
  /** In place: every rank ends with `root`'s `buf`. */
  broadcast(buf: NativeBuffer, root: number): Promise<Done>;
  /** `outs` is one flat buffer of size × input.count elements, or one buffer per rank. */
  allGather(outs: NativeBuffer[], input: NativeBuffer): Promise<Done>;
  /** `allGather` on the calling thread, returning when done; throws DistError (as the row says). */
  allGatherBlocking(outs: NativeBuffer[], input: NativeBuffer): void;
  /**
   * `allGather` started on a native thread of its own, returning before it ends; every call made
   * afterwards runs after it (as the row says: without it, FSDP's forward does not prefetch).
   */
  allGatherStart(outs: NativeBuffer[], input: NativeBuffer): StartedCollective;
  /** Rank r receives chunk r (of out.count elements) of the reduction of every `input`. */
  reduceScatter(out: NativeBuffer, input: NativeBuffer, op: ReduceOp): Promise<Done>;
  /** `reduceScatter` on the calling thread, as `allReduceBlocking` (as the row says). */
  reduceScatterBlocking(out: NativeBuffer, input: NativeBuffer, op: ReduceOp): Done;
  /** Resolves once every rank has called it. */
  barrier(): Promise<Done>;
  /**
   * Allocates `count` elements of `dtype` per rank in memory every rank maps (as the row says:
   * shared memory only). A collective: every rank passes the same count and dtype.
   */
  allocShared(count: number, dtype: DType): Promise<SharedBlock>;
  /**
   * Posts a point-to-point message (as the row says), on the JavaScript thread: that fixes its
   * place among the messages between this rank and its peer. Not ordered with the collectives:
   * a message runs beside them. Throws DistError "invalid" for a bad message.
   */
  postP2P(message: P2PMessage): PostedP2P;
  /** Releases native resources. Idempotent; no call may be in flight. */
  close(): void;
}

/**
 * Anything collectives can work on: a contiguous native buffer with a dtype. dtrain's
 * Tensor fits; so does a small wrapper over a typed array.
 */
export interface TensorLike {
  /** Element type; collectives accept "f32", "i32", "bf16" and "f16". */
  readonly dtype: string;
  /** Number of elements, as a property or a method. */
  readonly numel: number | (() => number);
  /** Whether the elements are contiguous in memory. */
  isContiguous(): boolean;
  /** The dimensions, if it has any (point-to-point messages check them on both sides). */
  readonly shape?: readonly number[];
  /** Address of the first element. */
  readonly ptr: Deno.PointerValue;
  /**
   * Where the memory lives (`"cpu"` when absent; a GPU's needs the nccl or auto backend, an
   * emulated device's the emu or auto backend).
   */
  readonly device?: string;
  /**
   * The reference-counted memory behind `ptr`, if any (dtrain's Tensor has one). Collectives
   * retain it while queued or running, so disposing the tensor meanwhile cannot free the bytes
   * the backend is about to read or write.
   */
  readonly storage?: { retain(): void; release(): void };
}

/** The backends `initProcessGroup` accepts (keys of `REQUESTS` in backends.ts). */
export type BackendName = "gloo" | "nccl" | "emu" | "auto";
