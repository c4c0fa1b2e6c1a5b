/**
 * A process group: a set of ranks with the communicators of one backend (up to three under
 * "auto": one for host memory, one for a GPU's, one for an emulated device's), whose collectives are validated here, sent to the
 * communicator that reaches their tensors (backends.ts), and issued on one queue so every rank
 * runs them in the same order.
 * @module
 */

import {
  bufferOf,
  checkOp,
  checkShared,
  gatherBuffers,
  invalid,
  memoryOf,
  scatterBuffers,
} from "./arguments.ts";
import type { Backend, Done, DType, ReduceOp, SharedBlock, TensorLike } from "./backend.ts";
import { nbytes } from "./backend.ts";
import { type Capability, type Connected, entryOf } from "./backends.ts";
import { CallingThreadCollectives } from "./calling_thread.ts";
import { lacks } from "./capabilities.ts";
import { DistError } from "./errors.ts";
import { route } from "./route.ts";
import { IssueOrder } from "./issue_order.ts";
import { trackTensor } from "./track.ts";
import type { BlockingWork, Work } from "./work.ts";

/**
 * Turns a collective's failure into the error its Work rejects with (see init.ts).
 * @ignore dtrain-internal (its module is re-exported with `export *`)
 */
export type Diagnose = (err: unknown, group: ProcessGroup) => Promise<unknown>;

/**
 * A group of ranks that run collectives together. Obtain one from `initProcessGroup`
 * (the world) or `newGroup`. On a rank outside the group, `rank` is -1 and collectives throw.
 *
 * Collectives throw DistError "invalid" synchronously for bad arguments; everything that
 * involves other ranks (timeouts, dead peers, mismatched calls) rejects the returned Work, or
 * for the `...Blocking` ones, which return when done, is thrown.
 */
export class ProcessGroup {
  /** This process's rank within the group, or -1 if it is not a member. */
  readonly rank: number;
  /** Number of ranks in the group. */
  readonly size: number;
  /** Global ranks of the members, ascending; group rank i is `ranks[i]`. */
  readonly ranks: readonly number[];
  #connected: Connected | null;
  #diagnose: Diagnose;
  #order: IssueOrder;
  #destroyed = false;
  /** The `...Blocking` collectives and `allGatherStart`. */
  #callingThread: CallingThreadCollectives;

  /**
   * Creates a `ProcessGroup`.
   *
   * @param ranks Global ranks of the members, ascending.
   * @param rank This process's rank within the group, or -1.
   * @param connected The connected communicators (null on non-members), from backends.ts.
   * @param diagnose Turns a collective's failure into the error its Work rejects with.
   * @param name The group's name in the ledger and diagnoses: "world", or "group<N>" for the
   *   N-th `newGroup` (the same on every rank).
   */
  constructor(
    ranks: readonly number[],
    rank: number,
    connected: Connected | null,
    diagnose: Diagnose = (err) => Promise.resolve(err),
    readonly name: string = "world",
  ) {
    this.ranks = ranks;
    this.size = ranks.length;
    this.rank = rank;
    this.#connected = connected;
    this.#diagnose = diagnose;
    this.#order = new IssueOrder((err) => diagnose(err, this));
    this.#callingThread = new CallingThreadCollectives(this, this.#order);
  }

  /** Name of the backend ("shm", "gloo", "shm+gloo", "nccl", "emu", "auto"); "none" off-group. */
  get backendName(): string {
    return this.#connected?.name ?? "none";
  }

  /** Whether `destroy()` was called. */
  get destroyed(): boolean {
    return this.#destroyed;
  }

  /**
   * Reduces `t` in place across the group.
   *
   * @param t The tensor; every rank passes the same dtype and length.
   * @param op The reduction; "avg" needs a floating-point dtype (f32, bf16, f16).
   * @returns The collective in flight.
   */
  allReduce(t: TensorLike, op: ReduceOp = "sum"): Work {
    const what = "allReduce";
    const buf = bufferOf(what, "tensor", t);
    checkOp(what, op, buf.dtype);
    return this.#enqueue(what, (b) => b.allReduce(buf, op), [t], nbytes(buf));
  }

  /**
   * `allReduce` on the calling thread, returning when it is done, for code that cannot await
   * (tensor parallelism inside forward and backward) or has nothing else to do meanwhile (DDP's
   * last bucket, once backward has returned: it saves the hand-off to a native thread and back).
   * On a backend with its own issue queue (shared memory, emu) it runs after every collective
   * issued before it; on another (Gloo, shm+gloo, NCCL) nothing may be in flight on the group.
   *
   * @param t The tensor, in place; every rank passes the same dtype and length.
   * @param op The reduction; "avg" needs a floating-point dtype (f32, bf16, f16).
   * @throws DistError "invalid" for bad arguments or calls in flight; otherwise the backend's
   *   DistError, naming the collective and, for a dead or missing peer, its global rank.
   */
  allReduceBlocking(t: TensorLike, op: ReduceOp = "sum"): void {
    this.#callingThread.allReduce(t, op);
  }

  /**
   * Whether `allReduceBlocking` can run while earlier collectives are still in flight, whatever
   * memory its tensors are in: every communicator has it and its own issue queue (shared memory,
   * emu). DDP reduces its last bucket blocking only then.
   */
  get canAllReduceBlocking(): boolean {
    return this.#everyBackend((b) => {
      const row = entryOf(b.name);
      return row.capabilities.allReduceBlocking && row.queued;
    });
  }

  /**
   * What a failed collective's Work would reject with: `err` with the group's diagnosis (which
   * ranks died or hung, asked of the store) for a timeout or a dead peer, else `err` itself. For
   * a caller that turns a blocking call's error into a Work (DDP's last bucket).
   *
   * @param err What a blocking collective threw.
   * @returns The diagnosed error.
   */
  diagnose(err: unknown): Promise<unknown> {
    return this.#diagnose(err, this);
  }

  /**
   * Copies `src`'s tensor into `t` on every rank.
   *
   * @param t The tensor, in place; every rank passes the same dtype and length.
   * @param src The global rank to copy from; must be a member.
   * @returns The collective in flight.
   */
  broadcast(t: TensorLike, src: number): Work {
    const what = "broadcast";
    const buf = bufferOf(what, "tensor", t);
    const root = this.ranks.indexOf(src);
    if (!Number.isInteger(src) || root < 0) {
      throw invalid(`${what}: src ${src} is not a rank of this group (ranks ${this.#members()})`);
    }
    return this.#enqueue(what, (b) => b.broadcast(buf, root), [t], nbytes(buf));
  }

  /**
   * Gathers every rank's `t`.
   *
   * @param out One tensor per rank (each as long as `t`), or one flat tensor of
   *   `size × t` elements in rank order.
   * @param t This rank's contribution.
   * @returns The collective in flight.
   */
  allGather(out: TensorLike | TensorLike[], t: TensorLike): Work {
    const { outs, input } = gatherBuffers("allGather", this.size, out, t);
    const bytes = this.size * nbytes(input);
    return this.#enqueue("allGather", (b) => b.allGather(outs, input), [...[out].flat(), t], bytes);
  }

  /**
   * `allGather` that runs on the calling thread and returns when it is done, for code that
   * cannot await (FSDP's synchronous forward, tensor parallelism). Ordered as
   * `allReduceBlocking`; a failure throws the backend's DistError (it names the peer when the
   * transport knows it).
   */
  allGatherBlocking(out: TensorLike | TensorLike[], t: TensorLike): void {
    this.#callingThread.allGather(out, t);
  }

  /** Whether this group's backend has `allGatherStart` (Gloo does; FSDP prefetches with it). */
  get canStartAllGather(): boolean {
    return this.#everyBackend((b) => entryOf(b.name).capabilities.allGatherStart);
  }

  /**
   * `allGather` started on a native thread of its own, for code that cannot await but has work
   * to do meanwhile (FSDP's forward gathers the next group while the current one computes).
   * Collectives issued afterwards run after it. As for `allGatherBlocking`, nothing may be in
   * flight when it is called; a failure throws from `waitBlocking`.
   */
  allGatherStart(out: TensorLike | TensorLike[], t: TensorLike): BlockingWork {
    return this.#callingThread.startAllGather(out, t);
  }

  /**
   * Reduces `input` across the group and leaves chunk r of the result on rank r.
   *
   * @param out This rank's chunk; `input` must hold exactly `size × out` elements.
   * @param input The tensor to reduce; not modified.
   * @param op The reduction; "avg" needs a floating-point dtype (f32, bf16, f16).
   * @returns The collective in flight.
   */
  reduceScatter(out: TensorLike, input: TensorLike, op: ReduceOp = "sum"): Work {
    const what = "reduceScatter";
    const { o, i } = scatterBuffers(what, this.size, out, input, op);
    const tensors = [out, input];
    const call = (b: Backend) => b.reduceScatter(o, i, op);
    return this.#enqueue(what, call, tensors, nbytes(i), "reduceScatter");
  }

  /**
   * `reduceScatter` on the calling thread, returning when it is done, for code that cannot await
   * (tensor parallelism). Ordered as `allReduceBlocking`.
   *
   * @param out This rank's chunk; `input` must hold exactly `size × out` elements.
   * @param input The tensor to reduce; not modified.
   * @param op The reduction; "avg" needs a floating-point dtype (f32, bf16, f16).
   * @throws DistError as `allReduceBlocking`.
   */
  reduceScatterBlocking(out: TensorLike, input: TensorLike, op: ReduceOp = "sum"): void {
    this.#callingThread.reduceScatter(out, input, op);
  }

  /**
   * Waits until every rank of the group reaches its barrier.
   * @returns The collective in flight.
   */
  barrier(): Work {
    return this.#enqueue("barrier", (b) => b.barrier(), [], 0);
  }

  /**
   * Allocates `count` elements of `dtype` per rank in memory that every rank of the group maps,
   * in order with the group's collectives (a collective call: every rank passes the same count
   * and dtype). An all-reduce on memory inside this rank's part then reduces every rank's part
   * in place, which saves the shared-memory backend a copy of every byte. `emptyShared` wraps it
   * in a tensor.
   *
   * @returns The block, or null when the backend has no shared memory (Gloo, NCCL, hosts apart).
   */
  async allocShared(count: number, dtype: DType): Promise<SharedBlock | null> {
    const what = "allocShared";
    checkShared(what, count, dtype);
    // A call without tensors goes to the group's first communicator: host memory's, if any.
    const backend = this.#member(what).backends[0];
    if (!entryOf(backend.name).capabilities.allocShared) return null;
    let block: SharedBlock | null = null;
    await this.#enqueue(
      what,
      async (b) => {
        block = await b.allocShared(count, dtype);
      },
      [],
      0,
    );
    return block;
  }

  /** Lets collectives in flight finish, then releases the communicators. Idempotent. */
  async destroy(): Promise<void> {
    if (this.#destroyed) return;
    this.#destroyed = true;
    await this.#order.drained();
    this.#callingThread.waitStarted();
    this.#connected?.backends.forEach((b) => b.close());
    this.#connected = null;
  }

  #members(): string {
    const r = this.ranks;
    const contiguous = r.every((x, i) => x === r[0] + i);
    return contiguous && r.length > 2 ? `${r[0]}..${r[r.length - 1]}` : r.join(", ");
  }

  /** The communicators, or an error when the group was destroyed or this process is not a member. */
  #member(what: string): Connected {
    if (this.#destroyed) throw new DistError("invalid", `${what}: process group was destroyed`);
    if (this.#connected === null) {
      throw invalid(
        `${what}: this process is not a member of the group (ranks ${this.#members()})`,
      );
    }
    return this.#connected;
  }

  /** Whether every communicator of the group passes `test` (false on non-members). */
  #everyBackend(test: (b: Backend) => boolean): boolean {
    return this.#connected !== null && this.#connected.backends.every(test);
  }

  /**
   * Whether this group's collectives reach tensors on `device` (`"cpu"`, `"cuda:0"`, `"emu:1"`):
   * a communicator serves its memory (and the device, for one bound to this rank's). For code
   * that makes small tensors of its own to send, such as DDP's checks, to put them where the
   * group reaches (on a device-only group, the model's device). False on non-members.
   *
   * @param device The device's name.
   * @returns Whether a collective on a tensor there would be sent.
   */
  reaches(device: string): boolean {
    if (this.#connected === null || this.#destroyed) return false;
    try {
      route("reaches", this.#connected, memoryOf("reaches", [{ device } as TensorLike]), [device]);
      return true;
    } catch {
      return false;
    }
  }

  /**
   * The communicator that reaches `tensors` (each backend's `reaches` in backends.ts), checked to
   * have what `needs` names: a caller learns from the table what a backend cannot reach or do.
   * @ignore dtrain-internal (point-to-point messages, src/distributed/p2p.ts, are sent through it)
   */
  serving(what: string, tensors: TensorLike[], needs?: Capability): Backend {
    const devices = tensors.map((t) => t.device);
    const backend = route(what, this.#member(what), memoryOf(what, tensors), devices);
    if (needs !== undefined && !entryOf(backend.name).capabilities[needs]) {
      throw lacks(what, backend.name, needs);
    }
    return backend;
  }

  #enqueue(
    what: string,
    call: (b: Backend) => Promise<Done>,
    tensors: TensorLike[],
    bytes: number,
    needs?: Capability,
  ): Work {
    const backend = this.serving(what, tensors, needs);
    const tracked = trackTensor(this.name, what, tensors.at(-1), bytes);
    return this.#order.issue(tracked, backend, call, tensors);
  }
}
