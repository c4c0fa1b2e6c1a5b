/**
 * Point-to-point messages on NCCL: the messages posted in one turn of the JavaScript thread (a
 * `batchIsendIrecv`, or `isend` and `irecv` called one after the other) go to NCCL as one group,
 * as PyTorch's NCCL backend does, since sends and receives issued one by one on a stream would
 * wait on each other (two ranks that both send first would deadlock). The groups run one at a
 * time, in the order they were posted: NCCL matches a pair's messages in the order it is given
 * them, and two groups handed to it from two threads at once would reach it in either order (and
 * a communicator is not for two threads at once). So a group's sends wait for the groups before
 * it, on both sides: code that sends and receives in separate turns must post them so that every
 * rank's groups meet (the pipeline schedules do: [Note: pipeline time steps] in
 * src/parallel/pipelining/_timeline.ts). A blocking message takes the messages posted before it
 * into its own group, and is refused while a group runs.
 * @module
 */

import { CollectiveDType, P2PKind } from "../../ffi/collective_codes.ts";
import { type P2PMessage, pointersOf, type PostedP2P } from "./backend.ts";
import { DistError } from "./errors.ts";

/** Runs one group of messages, off the JavaScript thread or on it. */
export interface GroupRunner {
  /** Sends and receives `messages` in one NCCL group, off the JavaScript thread. */
  run(messages: P2PMessage[]): Promise<void>;
  /** The same on the calling thread. */
  runBlocking(messages: P2PMessage[]): void;
}

/** Gathers the messages of one turn into a group. */
export class P2PGroups {
  #runner: GroupRunner;
  #pending: { message: P2PMessage; settle: (err: unknown) => void }[] = [];
  #scheduled = false;
  /** Settles when the last group posted has ended: the next one starts after it. */
  #tail: Promise<void> = Promise.resolve();
  #running = 0;

  /**
   * Creates a `P2PGroups`.
   *
   * @param runner The backend's group calls.
   */
  constructor(runner: GroupRunner) {
    this.#runner = runner;
  }

  /**
   * Posts `message` in the group being gathered.
   *
   * @param message The checked message.
   * @returns The posted message.
   */
  post(message: P2PMessage): PostedP2P {
    let outcome: ((err: unknown) => void) | null = null;
    const done = new Promise<void>((resolve, reject) => {
      outcome = (err) => err === undefined ? resolve() : reject(err);
    });
    done.catch(() => {}); // reported through run(); a blocking run throws it instead
    let result: { err: unknown } | null = null;
    this.#pending.push({
      message,
      settle: (err) => {
        result = { err };
        outcome!(err);
      },
    });
    return {
      run: () => {
        if (!this.#scheduled) {
          this.#scheduled = true;
          queueMicrotask(() => this.#flush());
        }
        return done;
      },
      runBlocking: () => {
        if (this.#running > 0) {
          throw new DistError(
            "invalid",
            `NCCL point-to-point: a blocking message while ${this.#running} group(s) of ` +
              `messages posted before it still run; await them first`,
          );
        }
        const batch = this.#take();
        try {
          this.#runner.runBlocking(batch.map((p) => p.message));
        } catch (err) {
          batch.forEach((p) => p.settle(err));
          throw err;
        }
        batch.forEach((p) => p.settle(undefined));
      },
      // A blocking batch: its last message's runBlocking runs the whole group, this one included.
      start: () => () => {
        const r = result as { err: unknown } | null;
        if (r === null) throw new Error("NCCL point-to-point: the group never ran");
        if (r.err !== undefined) throw r.err;
      },
    };
  }

  #take() {
    const batch = this.#pending;
    this.#pending = [];
    return batch;
  }

  #flush(): void {
    this.#scheduled = false;
    const batch = this.#take();
    if (batch.length === 0) return;
    this.#running++;
    const ran = this.#tail.then(() => this.#runner.run(batch.map((p) => p.message)));
    this.#tail = ran.then(() => {}, () => {});
    ran.then(
      () => batch.forEach((p) => p.settle(undefined)),
      (err) => batch.forEach((p) => p.settle(err ?? new Error("NCCL group failed"))),
    ).finally(() => this.#running--);
  }
}

/**
 * The arrays `dt_nccl_p2p` takes after its count: kinds, peers, buffers, counts and dtypes.
 *
 * @param messages The group's messages.
 * @returns The arrays, in the native call's order.
 */
export function groupArguments(messages: P2PMessage[]): [
  Int32Array<ArrayBuffer>,
  Int32Array<ArrayBuffer>,
  BigUint64Array<ArrayBuffer>,
  BigUint64Array<ArrayBuffer>,
  Int32Array<ArrayBuffer>,
] {
  return [
    new Int32Array(messages.map((m) => P2PKind[m.kind])),
    new Int32Array(messages.map((m) => m.peer)),
    pointersOf(messages.map((m) => m.buf)),
    new BigUint64Array(messages.map((m) => BigInt(m.buf.count))),
    new Int32Array(messages.map((m) => CollectiveDType[m.buf.dtype])),
  ];
}
