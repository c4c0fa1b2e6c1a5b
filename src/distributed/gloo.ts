/**
 * The Gloo backend: TCP collectives on CPU memory through `libdtrain_gloo.so`. Every call
 * checks its fingerprint across ranks first (see [Note: fingerprint] in
 * csrc/gloo/fingerprint.cc) and runs off the JavaScript thread, except the `...Blocking` ones; an
 * `allGatherStart` runs on a native thread of its own that the JavaScript thread waits for
 * with a blocking call (see [Note: started collectives] in csrc/gloo/work.cc).
 * @module
 */

import { BaseBackend } from "./base_backend.ts";
import {
  CollectiveDType,
  CollectiveReduceOp,
  CollectiveStatus,
} from "../../ffi/collective_codes.ts";
import { type GlooSymbols, loadGloo } from "../../ffi/gloo.ts";
import {
  type BackendInit,
  type NativeBuffer,
  type P2PMessage,
  pointersOf,
  type PostedP2P,
  type ReduceOp,
  type StartedCollective,
} from "./backend.ts";
import { DistError } from "./errors.ts";
import { type NativeCalls, NativeContext, nativeError, pinned } from "./native_context.ts";
import { postNative } from "./p2p_native.ts";
import { StartedCollectives } from "./started.ts";

const encoder = new TextEncoder();

function cstr(s: string): Uint8Array<ArrayBuffer> {
  return encoder.encode(`${s}\0`);
}

/** How the Gloo library is called on a context. */
function glooCalls(lib: GlooSymbols): NativeCalls {
  return { name: "gloo", lastError: lib.dt_gloo_last_error, free: lib.dt_gloo_ctx_free };
}

/**
 * A Gloo communicator. Created by the process group; use `initProcessGroup` instead.
 *
 * @example Two ranks in one process sum their buffers
 * ```ts
 * import assert from "node:assert/strict";
 * import { GlooBackend } from "./gloo.ts";
 * import { StoreServer } from "./store/server.ts";
 * const store = StoreServer.listen({ hostname: "127.0.0.1", port: 0, token: "t" });
 * const connect = (rank: number) =>
 *   GlooBackend.connect({
 *     rank, size: 2, globalRanks: [0, 1], storeHost: "127.0.0.1", storePort: store.port,
 *     token: "t", prefix: "demo/", host: "127.0.0.1", iface: "", timeoutMs: 5000,
 *   });
 * const ranks = await Promise.all([connect(0), connect(1)]);
 * const data = [Float32Array.of(1, 2), Float32Array.of(10, 20)];
 * await Promise.all(ranks.map((gloo, r) =>
 *   gloo.allReduce({ ptr: Deno.UnsafePointer.of(data[r]), count: 2, dtype: "f32" }, "sum")
 * ));
 * assert.deepEqual(data, [Float32Array.of(11, 22), Float32Array.of(11, 22)]);
 * ranks.forEach((gloo) => gloo.close());
 * await store.close();
 * ```
 */
export class GlooBackend extends BaseBackend {
  readonly name = "gloo";
  #lib: GlooSymbols;
  #ctx: NativeContext;
  /** The waits of started collectives nobody has waited for yet. */
  #started = new StartedCollectives();

  private constructor(lib: GlooSymbols, ctx: Deno.PointerValue) {
    super();
    this.#lib = lib;
    this.#ctx = new NativeContext(this, ctx, glooCalls(lib));
  }

  /**
   * Rendezvous through the store and connect to every other rank.
   *
   * @param init Rank, size, store address and token, bind address, timeout.
   * @returns The connected backend.
   * @throws DistError naming what failed (store, timeout, bind address).
   */
  static async connect(init: BackendInit): Promise<GlooBackend> {
    const lib = loadGloo();
    const out = new BigUint64Array(1);
    const created = lib.dt_gloo_ctx_new(out);
    if (created !== CollectiveStatus.OK) {
      throw nativeError("gloo", lib.dt_gloo_last_error, null, created);
    }
    const ctx = Deno.UnsafePointer.create(out[0]);
    const [storeHost, token, prefix, host, iface] = [
      init.storeHost,
      init.token,
      init.prefix,
      init.host,
      init.iface,
    ].map(cstr);
    const globalRanks = new Int32Array(init.globalRanks);
    const status = await pinned(
      lib.dt_gloo_ctx_connect(
        ctx,
        storeHost,
        init.storePort,
        token,
        prefix,
        init.rank,
        init.size,
        globalRanks,
        host,
        iface,
        init.timeoutMs,
      ),
      [storeHost, token, prefix, globalRanks, host, iface],
    );
    if (status !== CollectiveStatus.OK) {
      const err = nativeError("gloo", lib.dt_gloo_last_error, ctx, status);
      lib.dt_gloo_ctx_free(ctx);
      const who = `rank ${init.globalRanks[init.rank]} (group of ${init.size})`;
      throw new DistError(err.code, `gloo rendezvous of ${who}: ${err.message}`);
    }
    return new GlooBackend(lib, ctx);
  }

  allReduce(buf: NativeBuffer, op: ReduceOp): Promise<void> {
    return this.#ctx.checked(
      this.#lib.dt_gloo_allreduce(
        this.#ctx.live,
        buf.ptr,
        buf.count,
        CollectiveDType[buf.dtype],
        CollectiveReduceOp[op],
      ),
    );
  }

  broadcast(buf: NativeBuffer, root: number): Promise<void> {
    return this.#ctx.checked(
      this.#lib.dt_gloo_broadcast(
        this.#ctx.live,
        buf.ptr,
        buf.count,
        CollectiveDType[buf.dtype],
        root,
      ),
    );
  }

  allGather(outs: NativeBuffer[], input: NativeBuffer): Promise<void> {
    const ptrs = pointersOf(outs);
    return this.#ctx.checked(
      this.#lib.dt_gloo_allgather(
        this.#ctx.live,
        input.ptr,
        input.count,
        CollectiveDType[input.dtype],
        ptrs,
        outs.length,
      ),
      [ptrs],
    );
  }

  override allReduceBlocking(buf: NativeBuffer, op: ReduceOp): void {
    const status = this.#lib.dt_gloo_allreduce_blocking(
      this.#ctx.live,
      buf.ptr,
      buf.count,
      CollectiveDType[buf.dtype],
      CollectiveReduceOp[op],
    );
    this.#ctx.check(status);
  }

  override allGatherBlocking(outs: NativeBuffer[], input: NativeBuffer): void {
    const ptrs = pointersOf(outs);
    const status = this.#lib.dt_gloo_allgather_blocking(
      this.#ctx.live,
      input.ptr,
      input.count,
      CollectiveDType[input.dtype],
      ptrs,
      outs.length,
    );
    this.#ctx.check(status);
  }

  override allGatherStart(outs: NativeBuffer[], input: NativeBuffer): StartedCollective {
    const handle = new BigUint64Array(1);
    const status = this.#lib.dt_gloo_allgather_start(
      this.#ctx.live,
      input.ptr,
      input.count,
      CollectiveDType[input.dtype],
      pointersOf(outs),
      outs.length,
      handle,
    );
    this.#ctx.check(status);
    const work = Deno.UnsafePointer.create(handle[0]);
    return this.#started.add(() => {
      const done = this.#lib.dt_gloo_work_wait(work);
      return done === CollectiveStatus.OK ? null : this.#ctx.error(done);
    }, () => this.#lib.dt_gloo_work_free(work));
  }

  override reduceScatter(out: NativeBuffer, input: NativeBuffer, op: ReduceOp): Promise<void> {
    return this.#ctx.checked(
      this.#lib.dt_gloo_reduce_scatter(
        this.#ctx.live,
        out.ptr,
        input.ptr,
        out.count,
        CollectiveDType[out.dtype],
        CollectiveReduceOp[op],
      ),
    );
  }

  override reduceScatterBlocking(out: NativeBuffer, input: NativeBuffer, op: ReduceOp): void {
    const status = this.#lib.dt_gloo_reduce_scatter_blocking(
      this.#ctx.live,
      out.ptr,
      input.ptr,
      out.count,
      CollectiveDType[out.dtype],
      CollectiveReduceOp[op],
    );
    this.#ctx.check(status);
  }

  barrier(): Promise<void> {
    return this.#ctx.checked(this.#lib.dt_gloo_barrier(this.#ctx.live));
  }

  /** A message over Gloo's unbound buffers, beside the collectives (csrc/gloo/p2p.cc). */
  override postP2P(message: P2PMessage): PostedP2P {
    const lib = this.#lib;
    return postNative(lib, "dt_gloo", this.#ctx.live, message, (status) => this.#ctx.error(status));
  }

  close(): void {
    if (this.#ctx.closed) return;
    // A started collective holds the context until it ends, and its work must be freed first.
    this.#started.waitAll();
    this.#ctx.close();
  }
}
