/**
 * The order a process group issues its collectives in: every rank issues them in call order,
 * each call starting at once on a backend with its own issue queue, otherwise after the previous
 * one settled; and how many are still in flight, which the blocking calls of a backend without a
 * queue must find at zero.
 * @module
 */

import type { Backend, Done, TensorLike } from "./backend.ts";
import { entryOf } from "./backends.ts";
import { hold } from "./ownership.ts";
import type { Tracked } from "./track.ts";
import { Work } from "./work.ts";

/** The issue order of one group. */
export class IssueOrder {
  #tail: Promise<void> = Promise.resolve();
  #inFlight = 0;
  #diagnose: (err: unknown) => Promise<unknown>;

  /**
   * Creates an `IssueOrder`.
   *
   * @param diagnose Turns a collective's failure into the error its Work rejects with.
   */
  constructor(diagnose: (err: unknown) => Promise<unknown>) {
    this.#diagnose = diagnose;
  }

  /** Collectives issued and not yet settled. */
  get inFlight(): number {
    return this.#inFlight;
  }

  /** Settles once every collective issued so far has settled. */
  drained(): Promise<void> {
    return this.#tail;
  }

  /**
   * Issues `call` on `backend` in order.
   *
   * @param tracked Its record in the ledger and the profile (track.ts).
   * @param backend The communicator that reaches `tensors`.
   * @param call The collective.
   * @param tensors Its tensors, whose memory is held until it has ended.
   * @returns The collective in flight.
   */
  issue(
    tracked: Tracked,
    backend: Backend,
    call: (b: Backend) => Promise<Done>,
    tensors: TensorLike[],
  ): Work {
    // The pointers were read at queue time: hold the memory behind them (and the tensor
    // objects, for those without a storage) until the collective has ended, and refuse any
    // other use of them meanwhile.
    const release = hold(tensors, tracked.entry?.op ?? "a collective", tracked);
    const invoke = () => {
      tracked.start();
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
    const started = entryOf(backend.name).queued || this.#inFlight === 0
      ? invoke()
      : this.#tail.then(invoke);
    this.#inFlight++;
    const done = started
      .then((timing) => tracked.end(timing))
      .catch(async (err) => {
        tracked.fail(err);
        throw await this.#diagnose(err);
      })
      .finally(() => {
        this.#inFlight--;
        release();
      });
    const previous = this.#tail;
    this.#tail = done.then(() => previous, () => previous);
    return new Work(done);
  }
}
