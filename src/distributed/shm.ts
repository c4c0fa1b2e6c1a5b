/**
 * The shared-memory backend: collectives between the ranks of one host through one segment in
 * `/dev/shm` (csrc/shm, [Note: shared-memory segment] in csrc/shm/internal.h). Same guarantees
 * as Gloo: fingerprints checked on every call, timeouts and dead peers named. The segment never
 * has a name ([Note: unnamed segments] in csrc/shm/segment.cc), so no kill leaves it behind and
 * no stranger can take or steer it. Collectives run
 * in issue order on a native queue, so the process group issues them without waiting; the
 * all-reduce, all-gather and reduce-scatter also run blocking (for synchronous code: FSDP's
 * forward, tensor parallelism), and the all-gather started on a thread.
 * @module
 */

import { BaseBackend } from "./base_backend.ts";
import {
  CollectiveDType,
  CollectiveReduceOp,
  CollectiveStatus,
} from "../../ffi/collective_codes.ts";
import { loadShm, type ShmSymbols } from "../../ffi/shm.ts";
import {
  type BackendInit,
  type DType,
  type NativeBuffer,
  type OpTiming,
  type P2PMessage,
  pointersOf,
  type PostedP2P,
  type ReduceOp,
  type SharedBlock,
  type StartedCollective,
} from "./backend.ts";
import { DistError, STATUS_CODES } from "./errors.ts";
import { nowUs } from "../profile/tracer.ts";
import { postNative } from "./p2p_native.ts";
import { openGroupSegment } from "./shm_rendezvous.ts";
import { NativeContext } from "./native_context.ts";
import { StartedCollectives } from "./started.ts";
import type { StoreClient } from "./store/client.ts";

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** Frees contexts whose backend was dropped without close(); a backstop only. */
/** Unmaps shared buffers dropped without `free`; a backstop only. */
const unmapOnCollect = new FinalizationRegistry<{ lib: ShmSymbols; handle: Deno.PointerValue }>(
  ({ lib, handle }) => lib.dt_shm_buffer_free(handle),
);

/**
 * Whether the shared-memory transport keeps its own issue queue (the `queued` of its rows in
 * backends.ts). On by default: the process group hands every call over the moment it is made, even from
 * synchronous code, so each DDP bucket's all-reduce starts as soon as its gradients are in,
 * while backward goes on. Env DTRAIN_SHM_QUEUE=0 chains calls as for Gloo instead (a call
 * issued while none runs starts at once); on our 2-core machines the two measure the same
 * (BENCHMARKS.md, "Shared memory between ranks").
 */
export function shmQueued(): boolean {
  return Deno.env.get("DTRAIN_SHM_QUEUE") !== "0";
}

/**
 * A shared-memory communicator over the ranks of one host. Created by the process group when
 * every member shares this host (the "shm" row of backends.ts; `DTRAIN_SHM=0` turns it off).
 *
 * @example Two ranks in one process sum their buffers
 * ```ts
 * import assert from "node:assert/strict";
 * import { ShmBackend } from "./shm.ts";
 * import { StoreClient } from "./store/client.ts";
 * import { StoreServer } from "./store/server.ts";
 * const server = StoreServer.listen({ hostname: "127.0.0.1", port: 0, token: "t" });
 * const connect = async (rank: number) => {
 *   const store = await StoreClient.connect({ hostname: "127.0.0.1", port: server.port, token: "t" });
 *   const init = {
 *     rank, size: 2, globalRanks: [0, 1], storeHost: "127.0.0.1", storePort: server.port,
 *     token: "t", prefix: "demo/", host: "127.0.0.1", iface: "", timeoutMs: 5000,
 *   };
 *   return await ShmBackend.connect(init, store).finally(() => store.close());
 * };
 * const ranks = await Promise.all([connect(0), connect(1)]);
 * const data = [Int32Array.of(1, 2), Int32Array.of(10, 20)];
 * await Promise.all(ranks.map((shm, r) =>
 *   shm.allReduce({ ptr: Deno.UnsafePointer.of(data[r]), count: 2, dtype: "i32" }, "sum")
 * ));
 * assert.deepEqual(data, [Int32Array.of(11, 22), Int32Array.of(11, 22)]);
 * ranks.forEach((shm) => shm.close());
 * await server.close();
 * ```
 */
export class ShmBackend extends BaseBackend {
  readonly name = "shm";
  #lib: ShmSymbols;
  #ctx: NativeContext;
  /** The waits of started gathers not yet waited for. */
  #started = new StartedCollectives();
  /**
   * What turns the library's clock (CLOCK_MONOTONIC) into the timeline's (`nowUs`, monotonic
   * too), so that the collectives sort right among the events JavaScript times. Both clocks are
   * monotonic, so one offset holds for the run; the wall clock, which NTP steps on a fresh
   * machine, once put a collective before the ones that had finished ahead of it.
   */
  #clockOffsetUs: number;

  private constructor(lib: ShmSymbols, ctx: Deno.PointerValue) {
    super();
    this.#lib = lib;
    this.#ctx = new NativeContext(this, ctx, {
      name: "shm",
      lastError: lib.dt_shm_last_error,
      free: lib.dt_shm_ctx_free,
    });
    this.#clockOffsetUs = nowUs() - lib.dt_shm_clock_us();
  }

  /**
   * Maps the group's segment: group rank 0 creates it once every member's process id is known
   * and publishes its handle (the descriptor to open, never a name), the others map it, and all
   * wait until everyone has (then rank 0 closes its descriptor).
   *
   * @param init Rank, size, job ranks, key prefix and timeout of the host-local group.
   * @param store A connected store client, used for the rendezvous only.
   * @returns The connected backend.
   * @throws DistError naming what failed (a member that never arrived, the segment).
   */
  static async connect(init: BackendInit, store: StoreClient): Promise<ShmBackend> {
    const lib = loadShm();
    return new ShmBackend(lib, await openGroupSegment(lib, init, store));
  }

  /**
   * Fails the whole host-local group with `err`: every member waiting in a collective, now or
   * later, rejects with its message instead of waiting for its timeout. The hierarchical backend
   * calls it when the step across hosts failed, which the other members cannot see.
   */
  abort(err: DistError): void {
    if (this.#ctx.closed) return;
    const status = Object.entries(STATUS_CODES).find(([, code]) => code === err.code)?.[0];
    this.#lib.dt_shm_abort(
      this.#ctx.live,
      Number(status ?? CollectiveStatus.EINTERNAL),
      encoder.encode(`${err.message}\0`),
    );
  }

  /** A call that returns when done, on the JavaScript thread; throws the context's error. */
  #now(call: (ctx: Deno.PointerValue) => number): void {
    this.#ctx.now(call);
  }

  /** Takes a ticket now, on the JavaScript thread: that fixes the order collectives run in. */
  async #run(
    call: (ctx: Deno.PointerValue, ticket: number, timing: Deno.PointerValue) => Promise<number>,
    refs: unknown[] = [],
  ): Promise<OpTiming> {
    const ctx = this.#ctx.live;
    const ticket = Number(this.#lib.dt_shm_ticket(ctx));
    // Pointers, not "buffer" arguments, here and for allGather's outputs: a nonblocking call with
    // a buffer argument stalled DDP's backward for milliseconds per bucket (BENCHMARKS.md).
    const timing = new Float64Array(2);
    await this.#ctx.checked(call(ctx, ticket, Deno.UnsafePointer.of(timing)), [...refs, timing]);
    return this.#timed(timing);
  }

  /** A collective's start and end, from the library's clock onto the timeline's. */
  #timed(timing: Float64Array): OpTiming {
    return { startUs: timing[0] + this.#clockOffsetUs, endUs: timing[1] + this.#clockOffsetUs };
  }

  allReduce(buf: NativeBuffer, op: ReduceOp): Promise<OpTiming> {
    return this.#run((ctx, t, timing) =>
      this.#lib.dt_shm_allreduce(
        ctx,
        t,
        buf.ptr,
        buf.count,
        CollectiveDType[buf.dtype],
        CollectiveReduceOp[op],
        timing,
      )
    );
  }

  broadcast(buf: NativeBuffer, root: number): Promise<OpTiming> {
    return this.#run((ctx, t, timing) =>
      this.#lib.dt_shm_broadcast(
        ctx,
        t,
        buf.ptr,
        buf.count,
        CollectiveDType[buf.dtype],
        root,
        timing,
      )
    );
  }

  allGather(outs: NativeBuffer[], input: NativeBuffer): Promise<OpTiming> {
    const ptrs = pointersOf(outs);
    return this.#run(
      (ctx, t, timing) =>
        this.#lib.dt_shm_allgather(
          ctx,
          t,
          input.ptr,
          input.count,
          CollectiveDType[input.dtype],
          Deno.UnsafePointer.of(ptrs),
          outs.length,
          timing,
        ),
      [ptrs],
    );
  }

  /**
   * The all-gather on the JavaScript thread, returning when done. It runs once every collective
   * issued earlier has ended, never waiting for a turn that only the event loop would give
   * ([Note: blocking collectives] in csrc/shm/internal.h); a dead peer is named at once.
   */
  override allGatherBlocking(outs: NativeBuffer[], input: NativeBuffer): void {
    this.#now((ctx) =>
      this.#lib.dt_shm_allgather_blocking(
        ctx,
        input.ptr,
        input.count,
        CollectiveDType[input.dtype],
        pointersOf(outs),
        outs.length,
      )
    );
  }

  /** The all-reduce on the JavaScript thread, returning when done, as `allGatherBlocking`. */
  override allReduceBlocking(buf: NativeBuffer, op: ReduceOp): OpTiming {
    const timing = new Float64Array(2);
    this.#now((ctx) =>
      this.#lib.dt_shm_allreduce_blocking(
        ctx,
        buf.ptr,
        buf.count,
        CollectiveDType[buf.dtype],
        CollectiveReduceOp[op],
        Deno.UnsafePointer.of(timing),
      )
    );
    return this.#timed(timing);
  }

  /** The reduce-scatter on the JavaScript thread, returning when done, as `allGatherBlocking`. */
  override reduceScatterBlocking(out: NativeBuffer, input: NativeBuffer, op: ReduceOp): OpTiming {
    const timing = new Float64Array(2);
    this.#now((ctx) =>
      this.#lib.dt_shm_reduce_scatter_blocking(
        ctx,
        out.ptr,
        input.ptr,
        out.count,
        CollectiveDType[out.dtype],
        CollectiveReduceOp[op],
        Deno.UnsafePointer.of(timing),
      )
    );
    return this.#timed(timing);
  }

  /** The broadcast on the JavaScript thread, returning when done, as `allGatherBlocking`. */
  broadcastBlocking(buf: NativeBuffer, root: number): void {
    this.#now((ctx) =>
      this.#lib.dt_shm_broadcast_blocking(ctx, buf.ptr, buf.count, CollectiveDType[buf.dtype], root)
    );
  }

  /** The all-gather on a native thread of its own; collectives issued afterwards run after it. */
  override allGatherStart(outs: NativeBuffer[], input: NativeBuffer): StartedCollective {
    const handle = new BigUint64Array(1);
    this.#now((ctx) =>
      this.#lib.dt_shm_allgather_start(
        ctx,
        input.ptr,
        input.count,
        CollectiveDType[input.dtype],
        pointersOf(outs),
        outs.length,
        handle,
      )
    );
    const work = Deno.UnsafePointer.create(handle[0]);
    return this.#started.add(() => {
      const buf = new Uint8Array(1024);
      const done = this.#lib.dt_shm_work_wait(work, buf, buf.length);
      const message = decoder.decode(buf.subarray(0, buf.indexOf(0)));
      return done === CollectiveStatus.OK
        ? null
        : new DistError(STATUS_CODES[done] ?? "internal", message || `shm status ${done}`);
    }, () => this.#lib.dt_shm_work_free(work));
  }

  override reduceScatter(out: NativeBuffer, input: NativeBuffer, op: ReduceOp): Promise<OpTiming> {
    return this.#run((ctx, t, timing) =>
      this.#lib.dt_shm_reduce_scatter(
        ctx,
        t,
        out.ptr,
        input.ptr,
        out.count,
        CollectiveDType[out.dtype],
        CollectiveReduceOp[op],
        timing,
      )
    );
  }

  /** A message through the pair's channel in the segment, beside the collectives (csrc/shm/p2p.cc). */
  override postP2P(message: P2PMessage): PostedP2P {
    return postNative(this.#lib, "dt_shm", this.#ctx.live, message, (s) => this.#ctx.error(s));
  }

  barrier(): Promise<OpTiming> {
    return this.#run((ctx, t, timing) => this.#lib.dt_shm_barrier(ctx, t, timing));
  }

  /**
   * A shared buffer ([Note: shared buffers] in csrc/shm/internal.h): one new segment with a part
   * per rank, which all-reduces on this rank's part reduce in place. It outlives the backend; a
   * block dropped without `free` is unmapped once collected.
   */
  override async allocShared(count: number, dtype: DType): Promise<SharedBlock> {
    const out = new BigUint64Array(1);
    await this.#run(
      (ctx, t, timing) =>
        this.#lib.dt_shm_buffer_alloc(
          ctx,
          t,
          count,
          CollectiveDType[dtype],
          Deno.UnsafePointer.of(out),
          timing,
        ),
      [out],
    );
    const lib = this.#lib;
    const handle = Deno.UnsafePointer.create(out[0]);
    const block = {
      ptr: lib.dt_shm_buffer_data(handle),
      free() {
        if (this.ptr === null) return;
        unmapOnCollect.unregister(block);
        lib.dt_shm_buffer_free(handle);
        this.ptr = null;
      },
    };
    unmapOnCollect.register(block, { lib, handle }, block);
    return block;
  }

  close(): void {
    if (this.#ctx.closed) return;
    // A started gather runs on the context until it ends, and its work must be freed first.
    this.#started.waitAll();
    this.#ctx.close();
  }
}
