/**
 * Collectives across hosts with several ranks each: within each host over shared memory, between
 * one leader per host (its lowest rank) over Gloo, then back within the host. Reductions run
 * in three steps (reduce on the host, reduce across leaders, broadcast on the host); all-gather
 * and reduce-scatter go through an all-reduce of a staging copy, which moves more bytes than a
 * dedicated algorithm would but keeps every step one of the two transports' own collectives.
 * @module
 */

import { BaseBackend } from "./base_backend.ts";
import {
  type Backend,
  type BackendInit,
  DTYPE_BYTES,
  type NativeBuffer,
  nbytes,
  type P2PMessage,
  type PostedP2P,
  type ReduceOp,
} from "./backend.ts";
import { bf16Bits, bf16Value } from "../tensor/dtype.ts";
import { DistError } from "./errors.ts";
import { GlooBackend } from "./gloo.ts";
import { ShmBackend } from "./shm.ts";
import type { StoreClient } from "./store/client.ts";

/** The bytes of `buf`, as a view of its native memory. */
function bytesOf(buf: NativeBuffer): Uint8Array {
  if (buf.count === 0 || buf.ptr === null) return new Uint8Array(0);
  return new Uint8Array(Deno.UnsafePointerView.getArrayBuffer(buf.ptr, nbytes(buf)));
}

/** A native buffer over JavaScript memory that stays reachable while `keep` is. */
function bufferOver(bytes: Uint8Array<ArrayBuffer>, buf: NativeBuffer): NativeBuffer {
  return {
    ptr: Deno.UnsafePointer.of(bytes),
    count: bytes.length / DTYPE_BYTES[buf.dtype],
    dtype: buf.dtype,
  };
}

/**
 * The second half of "avg" on the host: each element divided in f32 by `divisor` and, for the
 * 2-byte types, rounded back to nearest even, as the native kernels do ([Note: half reductions]
 * in csrc/gloo/reduce.cc).
 */
function divideInPlace(buf: NativeBuffer, divisor: number): void {
  const bytes = bytesOf(buf);
  if (buf.dtype === "f16") {
    const values = new Float16Array(bytes.buffer, bytes.byteOffset, buf.count);
    for (let i = 0; i < values.length; i++) values[i] = Math.fround(values[i] / divisor);
  } else if (buf.dtype === "bf16") {
    const bits = new Uint16Array(bytes.buffer, bytes.byteOffset, buf.count);
    for (let i = 0; i < bits.length; i++) bits[i] = bf16Bits(bf16Value(bits[i]) / divisor);
  } else {
    const values = new Float32Array(bytes.buffer, bytes.byteOffset, buf.count);
    for (let i = 0; i < values.length; i++) values[i] /= divisor;
  }
}

/**
 * A hierarchical communicator: the "shm+gloo" row of backends.ts, chosen when the group spans
 * hosts and some host runs more than one member.
 */
export class HierarchicalBackend extends BaseBackend {
  readonly name = "shm+gloo";
  #size: number;
  #rank: number;
  #hosts: number[][];
  #hostOf: number[];
  #indexOnHost: number[];
  #myHost: number;
  #local: ShmBackend | null;
  #leaders: GlooBackend | null;
  #broken: DistError | null = null;

  private constructor(
    init: BackendInit,
    hosts: number[][],
    local: ShmBackend | null,
    leaders: GlooBackend | null,
  ) {
    super();
    this.#size = init.size;
    this.#rank = init.rank;
    this.#hosts = hosts;
    this.#hostOf = new Array(init.size);
    this.#indexOnHost = new Array(init.size);
    hosts.forEach((members, h) =>
      members.forEach((r, i) => {
        this.#hostOf[r] = h;
        this.#indexOnHost[r] = i;
      })
    );
    this.#myHost = this.#hostOf[init.rank];
    this.#local = local;
    this.#leaders = leaders;
  }

  /**
   * Connects the host-local shared-memory group and, on leaders, the Gloo group of leaders.
   *
   * @param init The whole group's rank, size, store and timeout.
   * @param store A connected store client for the shared-memory rendezvous.
   * @param hosts Group ranks per host, hosts ordered by their lowest rank.
   * @returns The connected backend.
   */
  static async connect(
    init: BackendInit,
    store: StoreClient,
    hosts: number[][],
  ): Promise<HierarchicalBackend> {
    const h = hosts.findIndex((members) => members.includes(init.rank));
    const members = hosts[h];
    const local = members.length === 1 ? null : await ShmBackend.connect({
      ...init,
      rank: members.indexOf(init.rank),
      size: members.length,
      globalRanks: members.map((r) => init.globalRanks[r]),
      prefix: `${init.prefix}host${h}/`,
    }, store);
    try {
      const leaders = members[0] !== init.rank ? null : await GlooBackend.connect({
        ...init,
        rank: h,
        size: hosts.length,
        globalRanks: hosts.map((m) => init.globalRanks[m[0]]),
        prefix: `${init.prefix}leaders/`,
      });
      return new HierarchicalBackend(init, hosts, local, leaders);
    } catch (err) {
      local?.close();
      throw err;
    }
  }

  /**
   * Runs one step on the host's shared-memory group or (`across`) on the leaders' Gloo group, and
   * passes a lost or hung peer on to the other side at once: a failure across hosts fails the
   * host's group (its members wait for their leader), and a failure within a leader's host
   * closes its connections to the other leaders (who wait for it). Afterwards every call fails.
   */
  async #step(across: boolean, step: (b: Backend) => Promise<unknown>): Promise<void> {
    if (this.#broken) throw this.#broken;
    const backend = across ? this.#leaders : this.#local;
    if (backend === null) return;
    try {
      await step(backend);
    } catch (err) {
      this.#fail(across, err, false);
      throw err;
    }
  }

  async allReduce(buf: NativeBuffer, op: ReduceOp): Promise<void> {
    const inner = op === "avg" ? "sum" : op;
    await this.#step(false, (l) => l.allReduce(buf, inner));
    await this.#step(true, (l) => l.allReduce(buf, inner));
    await this.#step(false, (l) => l.broadcast(buf, 0));
    if (op === "avg" && buf.count > 0) divideInPlace(buf, this.#size);
  }

  /**
   * The all-reduce on the JavaScript thread, in the same three steps as `allReduce`, each the
   * blocking call of its transport.
   */
  override allReduceBlocking(buf: NativeBuffer, op: ReduceOp): void {
    const inner = op === "avg" ? "sum" : op;
    this.#blocking(false, this.#local, (l) => l.allReduceBlocking(buf, inner));
    this.#blocking(true, this.#leaders, (l) => l.allReduceBlocking(buf, inner));
    this.#blocking(false, this.#local, (l) => l.broadcastBlocking(buf, 0));
    if (op === "avg" && buf.count > 0) divideInPlace(buf, this.#size);
  }

  async broadcast(buf: NativeBuffer, root: number): Promise<void> {
    const rootHost = this.#hostOf[root];
    const onRootHost = this.#myHost === rootHost;
    if (onRootHost) await this.#step(false, (l) => l.broadcast(buf, this.#indexOnHost[root]));
    await this.#step(true, (l) => l.broadcast(buf, rootHost));
    if (!onRootHost) await this.#step(false, (l) => l.broadcast(buf, 0));
  }

  async allGather(outs: NativeBuffer[], input: NativeBuffer): Promise<void> {
    // Every rank's slice is zero except its own: a sum gathers them exactly.
    const bytes = nbytes(input);
    const staging = new Uint8Array(bytes * this.#size);
    staging.set(bytesOf(input), this.#rank * bytes);
    await this.allReduce(bufferOver(staging, input), "sum");
    if (outs.length === 1) bytesOf(outs[0]).set(staging);
    else outs.forEach((o, r) => bytesOf(o).set(staging.subarray(r * bytes, (r + 1) * bytes)));
  }

  /**
   * The all-gather on the JavaScript thread, for FSDP's synchronous forward: the host's chunks
   * gathered over shared memory, the hosts' blobs gathered between the leaders over Gloo (each
   * padded to the largest host's, since hosts may run different numbers of ranks), then the
   * whole result broadcast from each leader to its host's members.
   */
  override allGatherBlocking(outs: NativeBuffer[], input: NativeBuffer): void {
    const bytes = nbytes(input);
    const members = this.#hosts[this.#myHost];
    const widest = Math.max(...this.#hosts.map((h) => h.length));
    const result = new Uint8Array(bytes * this.#size);
    const hostBlob = new Uint8Array(bytes * widest);
    if (this.#local === null) hostBlob.set(bytesOf(input));
    this.#blocking(
      false,
      this.#local,
      (l) => l.allGatherBlocking([bufferOver(hostBlob, input)], input),
    );
    if (this.#leaders !== null) {
      const everyBlob = new Uint8Array(hostBlob.length * this.#hosts.length);
      const blobs = bufferOver(everyBlob, input);
      this.#blocking(
        true,
        this.#leaders,
        (l) => l.allGatherBlocking([blobs], bufferOver(hostBlob, input)),
      );
      this.#hosts.forEach((ranks, h) =>
        ranks.forEach((r, i) => {
          const at = (h * widest + i) * bytes;
          result.set(everyBlob.subarray(at, at + bytes), r * bytes);
        })
      );
    }
    if (members.length > 1) {
      this.#blocking(false, this.#local, (l) => l.broadcastBlocking(bufferOver(result, input), 0));
    }
    if (outs.length === 1) bytesOf(outs[0]).set(result);
    else outs.forEach((o, r) => bytesOf(o).set(result.subarray(r * bytes, (r + 1) * bytes)));
  }

  /**
   * `#step` for a blocking call on `backend` (the host's, or across hosts the leaders'), where
   * any failure across hosts fails the host's group too (see `#fail`).
   */
  #blocking<B extends Backend>(across: boolean, backend: B | null, step: (b: B) => void): void {
    if (this.#broken) throw this.#broken;
    if (backend === null) return;
    try {
      step(backend);
    } catch (err) {
      this.#fail(across, err, true);
      throw err;
    }
  }

  /**
   * After a failure on one side, fails the other side at once and every later call: after a lost
   * or hung peer always, and after any failure across hosts in a blocking call, since the host's
   * members then block their threads in the broadcast that would follow and must not wait out
   * their timeout.
   */
  #fail(across: boolean, err: unknown, blocking: boolean): void {
    const e = err instanceof DistError ? err : new DistError("internal", String(err));
    const lost = e.code === "peer" || e.code === "timeout";
    if (!lost && !(blocking && across)) return;
    this.#broken = new DistError("broken", `process group is unusable after: ${e.message}`);
    if (across) this.#local?.abort(e);
    else this.#leaders?.close();
  }

  override async reduceScatter(
    out: NativeBuffer,
    input: NativeBuffer,
    op: ReduceOp,
  ): Promise<void> {
    const staging = new Uint8Array(bytesOf(input));
    await this.allReduce(bufferOver(staging, input), op);
    const bytes = nbytes(out);
    bytesOf(out).set(staging.subarray(this.#rank * bytes, (this.#rank + 1) * bytes));
  }

  /** The reduce-scatter on the JavaScript thread, through `allReduceBlocking` as `reduceScatter`. */
  override reduceScatterBlocking(out: NativeBuffer, input: NativeBuffer, op: ReduceOp): void {
    const staging = new Uint8Array(bytesOf(input));
    this.allReduceBlocking(bufferOver(staging, input), op);
    const bytes = nbytes(out);
    bytesOf(out).set(staging.subarray(this.#rank * bytes, (this.#rank + 1) * bytes));
  }

  async barrier(): Promise<void> {
    await this.#step(false, (l) => l.barrier());
    await this.#step(true, (l) => l.barrier());
    await this.#step(false, (l) => l.barrier());
  }

  /**
   * A message over whichever transport reaches the peer: shared memory on this host, Gloo between
   * two hosts' leaders. Other ranks on other hosts have no connection to each other (every step
   * across hosts goes through the leaders), so a message between them is refused, saying so.
   */
  override postP2P(message: P2PMessage): PostedP2P {
    if (this.#broken) throw this.#broken;
    const peer = message.peer;
    const host = this.#hostOf[peer];
    if (host === this.#myHost) {
      return this.#local!.postP2P({ ...message, peer: this.#indexOnHost[peer] });
    }
    if (this.#leaders !== null && this.#indexOnHost[peer] === 0) {
      return this.#leaders.postP2P({ ...message, peer: host });
    }
    throw new DistError(
      "invalid",
      `${message.kind}: the shm+gloo backend connects other hosts only through their leaders ` +
        `(their lowest rank); group rank ${peer} is on another host and this rank or it is not ` +
        `a leader`,
    );
  }

  close(): void {
    this.#local?.close();
    this.#leaders?.close();
    this.#local = this.#leaders = null;
  }
}
