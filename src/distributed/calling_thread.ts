/**
 * A process group's collectives that do not go through its promise queue: the `...Blocking`
 * ones, which run on the calling thread and return when done (tensor parallelism inside forward
 * and backward, FSDP's synchronous forward, DDP's last bucket), and `allGatherStart`, which
 * starts on a native thread of its own and is waited for with a blocking call (FSDP's forward
 * prefetch). A backend with its own issue queue orders them after everything issued before;
 * on another, nothing may be in flight.
 * @module
 */

import { bufferOf, checkOp, gatherBuffers, invalid, scatterBuffers } from "./arguments.ts";
import type { Backend, Done, ReduceOp, TensorLike } from "./backend.ts";
import { nbytes } from "./backend.ts";
import { type Capability, entryOf } from "./backends.ts";
import type { IssueOrder } from "./issue_order.ts";
import type { ProcessGroup } from "./process_group.ts";
import { hold } from "./ownership.ts";
import { trackTensor } from "./track.ts";
import { BlockingWork } from "./work.ts";
import { diagnoseLater, orDiagnoseLater } from "./_pending_diagnosis.ts";

/** The calling-thread collectives of one process group (its `...Blocking` and `allGatherStart`). */
export class CallingThreadCollectives {
  #group: ProcessGroup;
  #order: IssueOrder;
  /** Collectives started on a native thread and not yet waited for. */
  #started = new Set<BlockingWork>();

  /**
   * Creates the calling-thread collectives of `group`.
   *
   * @param group The group: its name, size and `serving`.
   * @param order Its issue order, whose calls in flight a backend without a queue must await.
   */
  constructor(group: ProcessGroup, order: IssueOrder) {
    this.#group = group;
    this.#order = order;
  }

  /** `ProcessGroup.allReduceBlocking`. */
  allReduce(t: TensorLike, op: ReduceOp): void {
    const what = "allReduceBlocking";
    const buf = bufferOf(what, "tensor", t);
    checkOp(what, op, buf.dtype);
    const backend = this.#blocking(what, [t], "allReduceBlocking");
    this.#run("allReduce", t, nbytes(buf), () => backend.allReduceBlocking(buf, op));
  }

  /** `ProcessGroup.allGatherBlocking`. */
  allGather(out: TensorLike | TensorLike[], t: TensorLike): void {
    const what = "allGatherBlocking";
    const { outs, input } = gatherBuffers(what, this.#group.size, out, t);
    const backend = this.#blocking(what, [...[out].flat(), t], "allGatherBlocking");
    const bytes = this.#group.size * nbytes(input);
    this.#run("allGather", t, bytes, () => backend.allGatherBlocking(outs, input));
  }

  /** `ProcessGroup.reduceScatterBlocking`. */
  reduceScatter(out: TensorLike, input: TensorLike, op: ReduceOp): void {
    const what = "reduceScatterBlocking";
    const { o, i } = scatterBuffers(what, this.#group.size, out, input, op);
    const backend = this.#blocking(what, [out, input], "reduceScatterBlocking");
    this.#run("reduceScatter", input, nbytes(i), () => backend.reduceScatterBlocking(o, i, op));
  }

  /** `ProcessGroup.allGatherStart`. */
  startAllGather(out: TensorLike | TensorLike[], t: TensorLike): BlockingWork {
    const what = "allGatherStart";
    const group = this.#group;
    const { outs, input } = gatherBuffers(what, group.size, out, t);
    const tensors = [...[out].flat(), t];
    const backend = this.#idle(what, tensors, "allGatherStart");
    // Timed from the start to the end of the wait: the backend does not say when the bytes moved.
    const bytes = group.size * nbytes(input);
    const tracked = trackTensor(group.name, "allGather", t, bytes, { started: true }).start();
    const release = hold(tensors, what, tracked, "call .waitBlocking() on its BlockingWork");
    let started;
    try {
      started = backend.allGatherStart(outs, input);
    } catch (err) {
      release();
      tracked.fail(err);
      throw err;
    }
    const work = new BlockingWork(started, (err) => {
      this.#started.delete(work);
      release();
      tracked.settle(err);
      if (err !== undefined) diagnoseLater(err, group);
    });
    this.#started.add(work);
    return work;
  }

  /** Waits for every started collective, ignoring failures (each is its waiter's to report). */
  waitStarted(): void {
    for (const work of [...this.#started]) {
      try {
        work.waitBlocking();
      } catch {
        // Its failure is its waiter's to report.
      }
    }
  }

  /** Runs a blocking call, tracked in the ledger and profile, its failure diagnosed later. */
  #run(op: string, t: TensorLike, bytes: number, call: () => Done): void {
    trackTensor(this.#group.name, op, t, bytes).run(() => orDiagnoseLater(this.#group, call));
  }

  /**
   * The backend for a blocking call on `tensors`: one with its own issue queue orders the call
   * after everything issued before it; another needs nothing in flight.
   */
  #blocking(what: string, tensors: TensorLike[], needs: Capability): Backend {
    const backend = this.#group.serving(what, tensors, needs);
    if (!entryOf(backend.name).queued) this.#refuseInFlight(what);
    return backend;
  }

  /** The backend for `tensors`, when nothing issued earlier is still queued behind this thread. */
  #idle(what: string, tensors: TensorLike[], needs: Capability): Backend {
    const backend = this.#group.serving(what, tensors, needs);
    this.#refuseInFlight(what);
    return backend;
  }

  #refuseInFlight(what: string): void {
    const inFlight = this.#order.inFlight;
    if (inFlight > 0) {
      throw invalid(`${what}: ${inFlight} collective(s) still in flight; await them first`);
    }
  }
}
