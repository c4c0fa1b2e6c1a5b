/**
 * The NCCL backend: collectives on GPU memory through the NCCL shim of `libdtrain_cuda.so`
 * (csrc/cuda/nccl.cu), with the Gloo backend's contract: the same fingerprint check and messages,
 * a timeout on every call (after which the communicator is aborted), a peer's death reported as
 * a "peer" error that the process group diagnoses through the store. The 128-byte NCCL unique id
 * travels through dtrain's store. Compute and communication are ordered on the GPU with events
 * (see [Note: NCCL streams] in csrc/cuda/nccl.cu).
 * @module
 */

import { BaseBackend } from "./base_backend.ts";
import {
  CollectiveDType,
  CollectiveReduceOp,
  CollectiveStatus,
} from "../../ffi/collective_codes.ts";
import { CudaStatus, type CudaSymbols } from "../../ffi/cuda.ts";
import { cudaLastError, requireCuda } from "../tensor/device/mod.ts";
import {
  type BackendInit,
  type NativeBuffer,
  type P2PMessage,
  pointersOf,
  type PostedP2P,
  type ReduceOp,
} from "./backend.ts";
import { DistError } from "./errors.ts";
import { type NativeCalls, NativeContext, nativeError, pinned } from "./native_context.ts";
import { groupArguments, P2PGroups } from "./nccl_p2p.ts";
import { StoreClient } from "./store/client.ts";

const UNIQUE_ID_BYTES = 128;

/** What NCCL needs beyond a Gloo rendezvous: the GPU this rank's communicator lives on. */
export interface NcclInit extends BackendInit {
  /** The CUDA device index (one GPU per local rank: the launcher's LOCAL_RANK). */
  device: number;
}

/**
 * `work`'s value, or a DistError "timeout" with `message` once `ms` have passed. NCCL's blocking
 * rendezvous has no timeout of its own (and a communicator that never formed cannot be aborted).
 */
function withinTimeout<T>(work: Promise<T>, ms: number, message: string): Promise<T> {
  let timer = 0 as unknown as ReturnType<typeof setTimeout>;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new DistError("timeout", message)), ms);
  });
  return Promise.race([work, late]).finally(() => clearTimeout(timer));
}

/** How the NCCL shim is called on a context: each collective ordered after the queued compute. */
function ncclCalls(lib: CudaSymbols): NativeCalls {
  return {
    name: "nccl",
    lastError: lib.dt_nccl_last_error,
    free: lib.dt_nccl_ctx_free,
    before: lib.dt_nccl_mark,
  };
}

/**
 * An NCCL communicator over one GPU per rank. Created by the process group
 * (`initProcessGroup({ backend: "nccl" })`); buffers are device pointers of `cuda:<device>`.
 */
export class NcclBackend extends BaseBackend {
  readonly name = "nccl";
  #lib: CudaSymbols;
  /** The communicator; its `live` orders the next collective after the compute queued so far. */
  #ctx: NativeContext;

  private constructor(lib: CudaSymbols, ctx: Deno.PointerValue) {
    super();
    this.#lib = lib;
    this.#ctx = new NativeContext(this, ctx, ncclCalls(lib));
  }

  /**
   * Exchanges the unique id through the store (group rank 0 makes it) and creates the
   * communicator on `init.device`.
   *
   * @param init Rank, size, store address and token, timeout, and the GPU.
   * @returns The connected backend.
   * @throws DistError "invalid" when CUDA or NCCL is unavailable (with the reason), "timeout"
   *   when the id or a peer does not come, "peer"/"internal" for NCCL's own failures.
   */
  static async connect(init: NcclInit): Promise<NcclBackend> {
    const who = `rank ${init.globalRanks[init.rank]} (group of ${init.size})`;
    let lib: CudaSymbols;
    try {
      lib = requireCuda("nccl backend: CUDA");
    } catch (err) {
      throw new DistError("invalid", `nccl rendezvous of ${who}: ${(err as Error).message}`);
    }
    const out = new BigUint64Array(1);
    const made = lib.dt_nccl_ctx_new(
      init.device,
      init.rank,
      init.size,
      new Int32Array(init.globalRanks),
      init.timeoutMs,
      out,
    );
    if (made !== CudaStatus.OK) {
      const message = cudaLastError(lib);
      if (out[0] !== 0n) lib.dt_nccl_ctx_free(Deno.UnsafePointer.create(out[0]));
      throw new DistError("invalid", `nccl rendezvous of ${who}: ${message}`);
    }
    const ctx = Deno.UnsafePointer.create(out[0]);
    try {
      const id = await exchangeUniqueId(lib, init);
      const status = await withinTimeout(
        pinned(lib.dt_nccl_connect(ctx, id), [id]),
        init.timeoutMs,
        `ncclCommInitRank did not finish within ${init.timeoutMs} ms (a peer never joined)`,
      );
      if (status !== CollectiveStatus.OK) {
        throw nativeError("nccl", lib.dt_nccl_last_error, ctx, status);
      }
    } catch (err) {
      // After a timeout the native rendezvous still holds the context: it cannot be freed, and
      // the process is expected to exit (the train job does).
      if (!(err instanceof DistError && err.code === "timeout")) lib.dt_nccl_ctx_free(ctx);
      const e = err instanceof DistError ? err : new DistError("internal", String(err));
      throw new DistError(e.code, `nccl rendezvous of ${who}: ${e.message}`);
    }
    return new NcclBackend(lib, ctx);
  }

  /** Orders a blocking call after the queued compute work and runs it on this thread. */
  #now(call: (ctx: Deno.PointerValue) => number): void {
    this.#ctx.now(call);
  }

  /** Orders the collective after the queued compute work, then awaits the shim's call. */
  #run(call: (ctx: Deno.PointerValue) => Promise<number>, refs: unknown[] = []): Promise<void> {
    return this.#ctx.run(call, refs);
  }

  allReduce(buf: NativeBuffer, op: ReduceOp): Promise<void> {
    return this.#run((ctx) =>
      this.#lib.dt_nccl_allreduce(
        ctx,
        buf.ptr,
        buf.count,
        CollectiveDType[buf.dtype],
        CollectiveReduceOp[op],
      )
    );
  }

  broadcast(buf: NativeBuffer, root: number): Promise<void> {
    return this.#run((ctx) =>
      this.#lib.dt_nccl_broadcast(ctx, buf.ptr, buf.count, CollectiveDType[buf.dtype], root)
    );
  }

  allGather(outs: NativeBuffer[], input: NativeBuffer): Promise<void> {
    const ptrs = pointersOf(outs);
    return this.#run((ctx) =>
      this.#lib.dt_nccl_allgather(
        ctx,
        input.ptr,
        input.count,
        CollectiveDType[input.dtype],
        ptrs,
        outs.length,
      ), [ptrs]);
  }

  /**
   * The all-gather on the JavaScript thread, for FSDP's synchronous forward: ordered after the
   * compute queued so far, and returning once the gather is done (same checks, timeout and abort
   * as the awaited one). FSDP's forward then computes on what it gathered; the next forward's
   * gather is not prefetched (this backend cannot start one on a thread of its own yet).
   */
  override allGatherBlocking(outs: NativeBuffer[], input: NativeBuffer): void {
    this.#now((ctx) =>
      this.#lib.dt_nccl_allgather_blocking(
        ctx,
        input.ptr,
        input.count,
        CollectiveDType[input.dtype],
        pointersOf(outs),
        outs.length,
      )
    );
  }

  /** The all-reduce on the JavaScript thread, as `allGatherBlocking` (tensor parallelism). */
  override allReduceBlocking(buf: NativeBuffer, op: ReduceOp): void {
    this.#now((ctx) =>
      this.#lib.dt_nccl_allreduce_blocking(
        ctx,
        buf.ptr,
        buf.count,
        CollectiveDType[buf.dtype],
        CollectiveReduceOp[op],
      )
    );
  }

  /** The reduce-scatter on the JavaScript thread, as `allGatherBlocking` (tensor parallelism). */
  override reduceScatterBlocking(out: NativeBuffer, input: NativeBuffer, op: ReduceOp): void {
    this.#now((ctx) =>
      this.#lib.dt_nccl_reduce_scatter_blocking(
        ctx,
        out.ptr,
        input.ptr,
        out.count,
        CollectiveDType[out.dtype],
        CollectiveReduceOp[op],
      )
    );
  }

  override reduceScatter(out: NativeBuffer, input: NativeBuffer, op: ReduceOp): Promise<void> {
    return this.#run((ctx) =>
      this.#lib.dt_nccl_reduce_scatter(
        ctx,
        out.ptr,
        input.ptr,
        out.count,
        CollectiveDType[out.dtype],
        CollectiveReduceOp[op],
      )
    );
  }

  /** Messages in NCCL groups, one per turn of the JavaScript thread (nccl_p2p.ts). */
  #groups = new P2PGroups({
    run: async (messages) => {
      const args = groupArguments(messages);
      await this.#run((ctx) => this.#lib.dt_nccl_p2p(ctx, messages.length, ...args), args);
    },
    runBlocking: (messages) =>
      this.#now((ctx) =>
        this.#lib.dt_nccl_p2p_blocking(ctx, messages.length, ...groupArguments(messages))
      ),
  });

  /** A message in this turn's NCCL group; its shape is not checked on NCCL (nccl_p2p.cu). */
  override postP2P(message: P2PMessage): PostedP2P {
    if (this.#ctx.closed) throw new DistError("broken", "nccl backend is closed");
    return this.#groups.post(message);
  }

  barrier(): Promise<void> {
    return this.#run((ctx) => this.#lib.dt_nccl_barrier(ctx));
  }

  close(): void {
    this.#ctx.close();
  }
}

/** Group rank 0 makes the unique id and publishes it under the group's prefix; the rest wait. */
async function exchangeUniqueId(lib: CudaSymbols, init: NcclInit): Promise<Uint8Array> {
  const store = await StoreClient.connect({
    hostname: init.storeHost,
    port: init.storePort,
    token: init.token,
    rank: init.globalRanks[init.rank],
    timeoutMs: init.timeoutMs,
  });
  const key = `${init.prefix}nccl/unique_id`;
  try {
    if (init.rank === 0) {
      const id = new Uint8Array(UNIQUE_ID_BYTES);
      const made = lib.dt_nccl_unique_id(id);
      if (made !== CudaStatus.OK) throw new DistError("invalid", cudaLastError(lib));
      await store.set(key, id);
      return id;
    }
    const id = await store.get(key, init.timeoutMs);
    if (id.length !== UNIQUE_ID_BYTES) {
      throw new DistError(
        "store",
        `the NCCL unique id in the store has ${id.length} bytes, not ${UNIQUE_ID_BYTES}`,
      );
    }
    return id;
  } finally {
    store.close();
  }
}
