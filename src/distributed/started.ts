/**
 * The backends' side of started collectives (`Backend.allGatherStart`): each handle waits once,
 * frees its native work, and keeps its outcome; closing a backend waits for those nobody waited
 * for, since each holds the context until it ends.
 * @module
 */

import type { StartedCollective } from "./backend.ts";
import type { DistError } from "./errors.ts";

/** One backend's started collectives that have not been waited for yet. */
export class StartedCollectives {
  #pending = new Set<() => void>();

  /**
   * Registers a started collective.
   *
   * @param wait Blocks until it ended; returns its error, or null.
   * @param free Frees its native work (after `wait`, once).
   * @returns Its handle: the first `waitBlocking` waits and frees, later ones repeat the outcome.
   */
  add(wait: () => DistError | null, free: () => void): StartedCollective {
    let failure: DistError | null | undefined; // undefined until waited
    const waitBlocking = () => {
      if (failure === undefined) {
        failure = wait();
        free();
        this.#pending.delete(waitBlocking);
      }
      if (failure !== null) throw failure;
    };
    this.#pending.add(waitBlocking);
    return { waitBlocking };
  }

  /** Waits for every pending one; a failure is kept for its own `waitBlocking` to throw. */
  waitAll(): void {
    for (const waitBlocking of [...this.#pending]) {
      try {
        waitBlocking();
      } catch {
        // Kept for its handle.
      }
    }
  }
}
