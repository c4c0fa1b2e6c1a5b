/**
 * What a collective in flight does to its tensors: it keeps their memory allocated, and it owns
 * their bytes, so that any use of them through dtrain throws an error naming it until it settles
 * (see [Note: collectives own their tensors] in src/tensor/storage.ts).
 * @module
 */

import { type Claim, Storage } from "../tensor/storage.ts";
import { Tensor } from "../tensor/tensor.ts";
import type { TensorLike } from "./backend.ts";
import { DistError } from "./errors.ts";
import type { LedgerEntry } from "./ledger.ts";
import type { Tracked } from "./track.ts";

/** How to wait for an awaitable collective (a `Work`). */
export const AWAIT_WORK = "await it, or call .wait()";

/** A collective in flight, as the error for a use of its tensors names it. */
class InFlight implements Claim {
  #op: string;
  #entry: LedgerEntry | null;
  #howToWait: string;

  constructor(op: string, entry: LedgerEntry | null, howToWait: string) {
    this.#op = op;
    this.#entry = entry;
    this.#howToWait = howToWait;
  }

  refuse(what: string): Error {
    const e = this.#entry;
    // The call site is formatted only now, on the error's path (see [Note: call sites at the cost
    // of a capture] in ledger.ts).
    const which = e === null
      ? "(op number and call site unknown: DTRAIN_LEDGER=0 turns the ledger off)"
      : `(op #${e.seq} of group "${e.group}", issued at ${e.site.text})`;
    return new DistError(
      "invalid",
      `${this.#op} ${which} is still in flight on this tensor (${what}): ${this.#howToWait}, ` +
        `before reading or writing the tensor or any view of it (dtrain's collectives return ` +
        `once issued, unlike PyTorch's synchronous all_reduce)`,
    );
  }
}

/**
 * The address of `t` for a collective being issued: unchecked for dtrain's tensors, since
 * collectives run in issue order, behind any that owns the tensor now (an all-reduce of a tensor
 * being sent is PyTorch's ordering too).
 *
 * @param t The collective's tensor.
 * @returns Its first element's address.
 */
export function addressOf(t: TensorLike): Deno.PointerValue {
  return t instanceof Tensor ? t.collectivePtr : t.ptr;
}

/**
 * Holds `tensors` for a collective being issued: their memory stays allocated and their bytes are
 * its own until the returned function is called, when it has settled.
 *
 * @param tensors Its tensors (their pointers already read).
 * @param op The call's name as the user wrote it ("allReduce", "isend").
 * @param tracked Its record: the ledger entry gives its op number and call site.
 * @param howToWait How the user waits for it ({@linkcode AWAIT_WORK} for a `Work`).
 * @returns Releases the tensors; call it once, when the collective has settled.
 */
export function hold(
  tensors: readonly TensorLike[],
  op: string,
  tracked: Tracked,
  howToWait: string = AWAIT_WORK,
): () => void {
  const claim = new InFlight(op, tracked.entry, howToWait);
  for (const t of tensors) {
    t.storage?.retain();
    if (t.storage instanceof Storage) t.storage.claim(claim);
  }
  return () => {
    for (const t of tensors) {
      if (t.storage instanceof Storage) t.storage.unclaim(claim);
      t.storage?.release();
    }
  };
}
