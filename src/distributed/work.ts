/**
 * Collectives in flight: `Work`, which is awaited, and `BlockingWork`, a collective started on a
 * native thread (`ProcessGroup.allGatherStart`) that the JavaScript thread waits for with a
 * blocking call, for code that cannot await but has work to do meanwhile.
 * @module
 */

import type { StartedCollective } from "./backend.ts";

/**
 * A collective in flight. Await it (or `wait()`) to learn that it finished. Until then it owns
 * its tensors: any use of them through dtrain throws an error naming it (see [Note: collectives
 * own their tensors] in src/tensor/storage.ts), and their storage stays allocated even if they
 * are disposed.
 */
export class Work implements PromiseLike<void> {
  #done: Promise<void>;
  #completed = false;

  /**
   * Creates a `Work`.
   *
   * @param done Settles when the collective finished.
   */
  constructor(done: Promise<void>) {
    this.#done = done;
    // Marking the promise handled: a failure surfaces on wait(), not as an unhandled
    // rejection of work nobody waited for (the next collective reports it anyway).
    done.then(() => (this.#completed = true), () => (this.#completed = true));
  }

  /** Resolves when the collective finished; rejects with its DistError. */
  wait(): Promise<void> {
    return this.#done;
  }

  /** Whether the collective has finished (successfully or not). */
  isCompleted(): boolean {
    return this.#completed;
  }

  /** Lets `await work` wait for it. */
  then<A = void, B = never>(
    onFulfilled?: ((value: void) => A | PromiseLike<A>) | null,
    onRejected?: ((reason: unknown) => B | PromiseLike<B>) | null,
  ): Promise<A | B> {
    return this.#done.then(onFulfilled, onRejected);
  }
}

/**
 * A collective running on a native thread of its own. It owns its tensors until `waitBlocking`
 * returns, as a `Work` does until it settles (their storage stays allocated even if they are
 * disposed meanwhile).
 *
 * @example Start an all-gather, work meanwhile, then wait
 * ```ts
 * import assert from "node:assert/strict";
 * import { dist, tensor, zeros } from "../../mod.ts";
 * const group = await dist.initProcessGroup({ initMethod: "tcp://127.0.0.1:0", rank: 0, worldSize: 1 });
 * const out = zeros([2]);
 * const work = group.allGatherStart(out, tensor([3, 4]));
 * const meanwhile = 1 + 1; // the gather runs on its own thread
 * work.waitBlocking();
 * assert.deepEqual(Array.from(out.toArray()), [3, 4]);
 * assert.equal(meanwhile, 2);
 * await dist.destroyProcessGroup();
 * ```
 */
export class BlockingWork {
  #started: StartedCollective;
  #settle: ((err?: unknown) => void) | null;

  /**
   * Creates a `BlockingWork`.
   *
   * @param started The backend's collective in flight.
   * @param settle Called once, when the collective has ended (releases what it held), with its
   *   error if it failed.
   */
  constructor(started: StartedCollective, settle: (err?: unknown) => void) {
    this.#started = started;
    this.#settle = settle;
  }

  /** Whether `waitBlocking` has returned or thrown. */
  get waited(): boolean {
    return this.#settle === null;
  }

  /**
   * Blocks the calling thread until the collective has ended (within the group's timeout).
   * Calling it again returns or throws the same at once.
   *
   * @throws DistError of the collective: a timeout naming the missing ranks, a lost connection
   *   naming the peer, or the fingerprint check's mismatch.
   */
  waitBlocking(): void {
    const settle = this.#settle;
    this.#settle = null;
    try {
      this.#started.waitBlocking();
    } catch (err) {
      settle?.(err ?? new Error("failed"));
      throw err;
    }
    settle?.();
  }
}
