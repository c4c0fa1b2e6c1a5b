/**
 * A process group: a set of ranks with one backend communicator, whose collectives are
 * validated here and issued on one queue so every rank runs them in the same order.
 * @module
 */

import { nowUs, profiling, recordCollective, takeTag } from "../profile/tracer.ts";
import type { Backend, Done, DType, NativeBuffer, ReduceOp, SharedBlock } from "./backend.ts";
import { REDUCE_OPS } from "./backend.ts";
import { DistError } from "./errors.ts";
import { BlockingWork, Work } from "./work.ts";

/**
 * Anything collectives can work on: a contiguous native buffer with a dtype. dtrain's
 * Tensor fits; so does a small wrapper over a typed array.
 */
export interface TensorLike {
  /** Element type; collectives accept "f32" and "i32". */
  readonly dtype: string;
  /** Number of elements, as a property or a method. */
  readonly numel: number | (() => number);
  /** Whether the elements are contiguous in memory. */
  isContiguous(): boolean;
  /** Address of the first element. */
  readonly ptr: Deno.PointerValue;
  /** Where the memory lives (`"cpu"` when absent; `"cuda:N"` needs the nccl or auto backend). */
  readonly device?: string;
  /**
   * The reference-counted memory behind `ptr`, if any (dtrain's Tensor has one). Collectives
   * retain it while queued or running, so disposing the tensor meanwhile cannot free the bytes
   * the backend is about to read or write.
   */
  readonly storage?: { retain(): void; release(): void };
}

/**
 * Turns a collective's failure into the error its Work rejects with (see init.ts).
 * @ignore dtrain-internal (its module is re-exported with `export *`)
 */
export type Diagnose = (err: unknown, group: ProcessGroup) => Promise<unknown>;

function invalid(message: string): DistError {
  return new DistError("invalid", message);
}

/** Checks `t` and describes it as a native buffer. */
function bufferOf(what: string, role: string, t: TensorLike): NativeBuffer {
  if (t === null || typeof t !== "object") {
    throw invalid(`${what}: ${role} must be a tensor, got ${t === null ? "null" : typeof t}`);
  }
  if (t.dtype !== "f32" && t.dtype !== "i32") {
    throw invalid(`${what}: ${role} dtype must be "f32" or "i32", got "${t.dtype}"`);
  }
  if (!t.isContiguous()) {
    throw invalid(`${what}: ${role} must be contiguous; call .contiguous() first`);
  }
  const count = typeof t.numel === "function" ? t.numel() : t.numel;
  if (!Number.isSafeInteger(count) || count < 0) {
    throw invalid(`${what}: ${role} has an invalid element count ${count}`);
  }
  const ptr = t.ptr;
  if (ptr === null && count > 0) throw invalid(`${what}: ${role} has a null data pointer`);
  return { ptr, count, dtype: t.dtype as DType, device: t.device ?? "cpu" };
}

function checkOp(what: string, op: ReduceOp, dtype: DType): void {
  if (!REDUCE_OPS.includes(op)) {
    throw invalid(`${what}: unknown reduce op "${op}"; use one of ${REDUCE_OPS.join(", ")}`);
  }
  if (op === "avg" && dtype !== "f32") {
    throw invalid(`${what}: op "avg" needs f32 tensors, got ${dtype}`);
  }
}

/**
 * A group of ranks that run collectives together. Obtain one from `initProcessGroup`
 * (the world) or `newGroup`. On a rank outside the group, `rank` is -1 and collectives throw.
 *
 * Collectives throw DistError "invalid" synchronously for bad arguments; everything that
 * involves other ranks (timeouts, dead peers, mismatched calls) rejects the returned Work.
 */
export class ProcessGroup {
  /** This process's rank within the group, or -1 if it is not a member. */
  readonly rank: number;
  /** Number of ranks in the group. */
  readonly size: number;
  /** Global ranks of the members, ascending; group rank i is `ranks[i]`. */
  readonly ranks: readonly number[];
  #backend: Backend | null;
  #diagnose: Diagnose;
  #tail: Promise<void> = Promise.resolve();
  /** Collectives issued and not yet settled. */
  #inFlight = 0;
  #destroyed = false;
  /** Collectives started on a native thread and not yet waited for. */
  #started = new Set<BlockingWork>();

  /**
   * Creates a `ProcessGroup`.
   *
   * @param ranks Global ranks of the members, ascending.
   * @param rank This process's rank within the group, or -1.
   * @param backend The connected communicator (null on non-members).
   * @param diagnose Turns a collective's failure into the error its Work rejects with.
   */
  constructor(
    ranks: readonly number[],
    rank: number,
    backend: Backend | null,
    diagnose: Diagnose = (err) => Promise.resolve(err),
  ) {
    this.ranks = ranks;
    this.size = ranks.length;
    this.rank = rank;
    this.#backend = backend;
    this.#diagnose = diagnose;
  }

  /** Name of the backend ("shm", "gloo", "shm+gloo"), or "none" on non-members. */
  get backendName(): string {
    return this.#backend?.name ?? "none";
  }

  /** Whether `destroy()` was called. */
  get destroyed(): boolean {
    return this.#destroyed;
  }

  /**
   * Reduces `t` in place across the group.
   *
   * @param t The tensor; every rank passes the same dtype and length.
   * @param op The reduction; "avg" needs f32.
   * @returns The collective in flight.
   */
  allReduce(t: TensorLike, op: ReduceOp = "sum"): Work {
    const what = "allReduce";
    const buf = bufferOf(what, "tensor", t);
    checkOp(what, op, buf.dtype);
    return this.#enqueue(what, (b) => b.allReduce(buf, op), [t], buf.count * 4);
  }

  /**
   * `allReduce` on the calling thread, returning when it is done, for a caller with nothing else
   * to do meanwhile (DDP's last bucket, once backward has returned): it saves the hand-off to a
   * native thread and back. Collectives issued earlier and still running come first. Needs a
   * backend with its own issue queue and a blocking all-reduce (shared memory; see
   * `canAllReduceBlocking`).
   *
   * @returns A Work that has already run: it resolves, or rejects with the failure diagnosed as
   *   `allReduce`'s would be (so a caller awaiting several reports the earliest one's error).
   */
  allReduceBlocking(t: TensorLike, op: ReduceOp = "sum"): Work {
    const what = "allReduceBlocking";
    const buf = bufferOf(what, "tensor", t);
    checkOp(what, op, buf.dtype);
    const backend = this.#member(what);
    if (backend.allReduceBlocking === undefined || !backend.queued) {
      throw invalid(`${what}: the ${backend.name} backend has no blocking all-reduce`);
    }
    this.#checkReach(what, backend, [t]);
    const profiled = profiling();
    const tag = profiled ? takeTag() : null;
    const startUs = profiled ? nowUs() : 0;
    let done: Promise<void>;
    try {
      const timing = backend.allReduceBlocking(buf, op);
      if (profiled) {
        recordCollective("allReduce", buf.count * 4, timing ?? { startUs, endUs: nowUs() }, tag);
      }
      done = Promise.resolve();
    } catch (err) {
      done = this.#diagnose(err, this).then((diagnosed) => Promise.reject(diagnosed));
    }
    return new Work(done);
  }

  /** Whether `allReduceBlocking` works on this group (over shared memory). */
  get canAllReduceBlocking(): boolean {
    return this.#backend?.allReduceBlocking !== undefined && this.#backend.queued === true;
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
    return this.#enqueue(what, (b) => b.broadcast(buf, root), [t], buf.count * 4);
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
    const { outs, input } = this.#gatherBuffers("allGather", out, t);
    const bytes = this.size * input.count * 4;
    return this.#enqueue("allGather", (b) => b.allGather(outs, input), [...[out].flat(), t], bytes);
  }

  /**
   * `allGather` that runs on the calling thread and returns when it is done, for code that
   * cannot await (FSDP's synchronous forward). Nothing else may be in flight on the group; a
   * failure throws the backend's DistError (it names the peer when the transport knows it).
   */
  allGatherBlocking(out: TensorLike | TensorLike[], t: TensorLike): void {
    const what = "allGatherBlocking";
    const { outs, input } = this.#gatherBuffers(what, out, t);
    const backend = this.#idle(what);
    this.#checkReach(what, backend, [...[out].flat(), t]);
    if (backend.allGatherBlocking === undefined) {
      throw invalid(`${what}: the ${backend.name} backend has no blocking collectives`);
    }
    backend.allGatherBlocking(outs, input);
  }

  /** Whether this group's backend has `allGatherStart` (Gloo does; FSDP prefetches with it). */
  get canStartAllGather(): boolean {
    return this.#backend?.allGatherStart !== undefined;
  }

  /**
   * `allGather` started on a native thread of its own, for code that cannot await but has work
   * to do meanwhile (FSDP's forward gathers the next group while the current one computes).
   * Collectives issued afterwards run after it. As for `allGatherBlocking`, nothing may be in
   * flight when it is called; a failure throws from `waitBlocking`.
   */
  allGatherStart(out: TensorLike | TensorLike[], t: TensorLike): BlockingWork {
    const what = "allGatherStart";
    const { outs, input } = this.#gatherBuffers(what, out, t);
    const backend = this.#idle(what);
    this.#checkReach(what, backend, [...[out].flat(), t]);
    if (backend.allGatherStart === undefined) {
      throw invalid(`${what}: the ${backend.name} backend cannot start collectives on a thread`);
    }
    const tensors = [...[out].flat(), t];
    for (const x of tensors) x.storage?.retain();
    const release = () => tensors.forEach((x) => x.storage?.release());
    let started;
    try {
      started = backend.allGatherStart(outs, input);
    } catch (err) {
      release();
      throw err;
    }
    const work = new BlockingWork(started, () => {
      this.#started.delete(work);
      release();
    });
    this.#started.add(work);
    return work;
  }

  /** The backend, when nothing issued earlier is still queued behind the JavaScript thread. */
  #idle(what: string): Backend {
    const backend = this.#member(what);
    if (this.#inFlight > 0) {
      throw invalid(`${what}: ${this.#inFlight} collective(s) still in flight; await them first`);
    }
    return backend;
  }

  #gatherBuffers(
    what: string,
    out: TensorLike | TensorLike[],
    t: TensorLike,
  ): { outs: NativeBuffer[]; input: NativeBuffer } {
    const input = bufferOf(what, "input", t);
    const outs = Array.isArray(out)
      ? out.map((o, i) => bufferOf(what, `output ${i}`, o))
      : [bufferOf(what, "output", out)];
    if (Array.isArray(out)) {
      if (outs.length !== this.size) {
        throw invalid(`${what}: got ${outs.length} outputs for a group of ${this.size} ranks`);
      }
      outs.forEach((o, i) =>
        this.#sameAs(what, `output ${i}`, o, input, input.count, "the input's length")
      );
    } else {
      const why = `input length ${input.count} × group size ${this.size}`;
      this.#sameAs(what, "output", outs[0], input, this.size * input.count, why);
    }
    return { outs, input };
  }

  /**
   * Reduces `input` across the group and leaves chunk r of the result on rank r.
   *
   * @param out This rank's chunk; `input` must hold exactly `size × out` elements.
   * @param input The tensor to reduce; not modified.
   * @param op The reduction; "avg" needs f32.
   * @returns The collective in flight.
   */
  reduceScatter(out: TensorLike, input: TensorLike, op: ReduceOp = "sum"): Work {
    const what = "reduceScatter";
    const o = bufferOf(what, "output", out);
    const i = bufferOf(what, "input", input);
    checkOp(what, op, i.dtype);
    const why = `output length ${o.count} × group size ${this.size}`;
    this.#sameAs(what, "input", i, o, this.size * o.count, why);
    return this.#enqueue(what, (b) => b.reduceScatter(o, i, op), [out, input], i.count * 4);
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
    if (!Number.isSafeInteger(count) || count < 0) {
      throw invalid(`${what}: count must be a non-negative integer, got ${count}`);
    }
    if (dtype !== "f32" && dtype !== "i32") {
      throw invalid(`${what}: dtype must be "f32" or "i32", got "${dtype}"`);
    }
    const backend = this.#member(what);
    if (backend.allocShared === undefined) return null;
    let block: SharedBlock | null = null;
    await this.#enqueue(
      what,
      async (b) => {
        block = await b.allocShared!(count, dtype);
      },
      [],
      0,
    );
    return block;
  }

  /**
   * Lets collectives in flight finish, then releases the communicator. Idempotent.
   */
  async destroy(): Promise<void> {
    if (this.#destroyed) return;
    this.#destroyed = true;
    await this.#tail;
    for (const work of [...this.#started]) {
      try {
        work.waitBlocking();
      } catch {
        // Its failure is its waiter's to report.
      }
    }
    this.#backend?.close();
    this.#backend = null;
  }

  #members(): string {
    const r = this.ranks;
    const contiguous = r.every((x, i) => x === r[0] + i);
    return contiguous && r.length > 2 ? `${r[0]}..${r[r.length - 1]}` : r.join(", ");
  }

  #sameAs(
    what: string,
    role: string,
    buf: NativeBuffer,
    ref: NativeBuffer,
    count: number,
    why: string,
  ): void {
    if (buf.dtype !== ref.dtype) {
      throw invalid(`${what}: ${role} is ${buf.dtype} but the other tensor is ${ref.dtype}`);
    }
    if (buf.count !== count) {
      throw invalid(`${what}: ${role} has ${buf.count} elements, expected ${count} (${why})`);
    }
  }

  /** The backend, or an error when the group was destroyed or this process is not a member. */
  #member(what: string): Backend {
    if (this.#destroyed) throw new DistError("invalid", `${what}: process group was destroyed`);
    if (this.#backend === null) {
      throw invalid(
        `${what}: this process is not a member of the group (ranks ${this.#members()})`,
      );
    }
    return this.#backend;
  }

  /** A backend reaches host memory (gloo, shm) or GPU memory (nccl) only; "auto" picks per call. */
  #checkReach(what: string, backend: Backend, tensors: TensorLike[]): void {
    const misplaced = tensors.find((t) =>
      (backend.name !== "nccl" && backend.name !== "auto" && t.device?.startsWith("cuda")) ||
      (backend.name === "nccl" && !t.device?.startsWith("cuda"))
    );
    if (misplaced !== undefined) {
      throw invalid(
        `${what}: a tensor is on ${misplaced.device ?? "cpu"}, which the ${backend.name} backend ` +
          `cannot reach; move it, or use the "auto" backend`,
      );
    }
  }

  #enqueue(
    what: string,
    call: (b: Backend) => Promise<Done>,
    tensors: TensorLike[],
    bytes: number,
  ): Work {
    const backend = this.#member(what);
    this.#checkReach(what, backend, tensors);
    // The pointers were read at queue time: hold the memory behind them (and the tensor
    // objects, for those without a storage) until the collective has ended.
    for (const t of tensors) t.storage?.retain();
    const profiled = profiling();
    const tag = profiled ? takeTag() : null;
    let startUs = 0;
    const invoke = () => {
      if (profiled) startUs = nowUs();
      try {
        return call(backend);
      } catch (err) {
        return Promise.reject(err);
      }
    };
    // In issue order on every rank. A queued backend orders calls itself, so each starts at
    // once on its native thread, even one issued from synchronous code (DDP's gradient hooks
    // during backward) while others run. Otherwise calls are chained: when nothing is in
    // flight the call starts at once, and one issued behind another starts when the
    // JavaScript thread next settles promises.
    const started = backend.queued || this.#inFlight === 0 ? invoke() : this.#tail.then(invoke);
    this.#inFlight++;
    const done = started
      .then((timing) => {
        if (profiled) recordCollective(what, bytes, timing ?? { startUs, endUs: nowUs() }, tag);
      })
      .catch(async (err) => {
        throw await this.#diagnose(err, this);
      })
      .finally(() => {
        this.#inFlight--;
        for (const t of tensors) t.storage?.release();
      });
    const previous = this.#tail;
    this.#tail = done.then(() => previous, () => previous);
    return new Work(done);
  }
}
