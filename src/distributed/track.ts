/**
 * The one hook every collective and point-to-point operation calls: it feeds both the profile
 * (src/profile/tracer.ts, when on) and the ledger (ledger.ts, on by default), so that a new
 * operation is recorded by one call. It costs one branch when both are off.
 * @module
 */

import type { OpTiming, TensorLike } from "./backend.ts";
import { ledgerAppend, type LedgerEntry, ledgerGroup } from "./ledger.ts";
import { nowUs, profiling, recordCollective, takeTag } from "../profile/tracer.ts";

/** What a tracked operation is. */
export interface TrackFields {
  /** The group's name (`ProcessGroup.name`). */
  group: string;
  /** The operation's name, as the timeline shows it ("allReduce", "send"). */
  op: string;
  /** Its element type ("" for none). */
  dtype: string;
  /** Its tensor's shape, or `[count]`. */
  shape: number[];
  /** The bytes it moves. */
  bytes: number;
  /** The peer's global rank, for point-to-point operations. */
  peer?: number;
}

/** An operation being tracked, marked as it goes. */
export class Tracked {
  #entry: LedgerEntry | null;
  #tag: Record<string, unknown> | null;
  #startUs = 0;

  /** Creates a `Tracked` (see {@linkcode track}). */
  constructor(entry: LedgerEntry | null, tag: Record<string, unknown> | null) {
    this.#entry = entry;
    this.#tag = tag;
  }

  /** Its ledger entry (op number, call site), or null when the ledger is off. */
  get entry(): LedgerEntry | null {
    return this.#entry;
  }

  /** Notes the peer of a point-to-point operation. */
  peer(rank: number): void {
    if (this.#entry) this.#entry.peer = rank;
  }

  /** Marks that its turn came now (the backend may say better at the end). */
  start(): this {
    this.#startUs = nowUs();
    if (this.#entry) this.#entry.startedUs = this.#startUs;
    return this;
  }

  /**
   * Marks it finished, with the backend's own timing when it measured one.
   *
   * @param timing When the bytes moved, or nothing: from `start()` (or the enqueue) to now.
   */
  end(timing?: OpTiming | void): void {
    const endUs = timing?.endUs ?? nowUs();
    const startUs = timing?.startUs ?? (this.#startUs || this.#entry?.enqueuedUs || endUs);
    const e = this.#entry;
    if (e) {
      e.startedUs = startUs;
      e.finishedUs = endUs;
    }
    if (this.#tag !== null) {
      const { op, bytes, ...extra } = this.#tag;
      recordCollective(op as string, bytes as number, { startUs, endUs }, extra);
    }
  }

  /**
   * Runs a blocking operation, marking it started, then finished or failed.
   *
   * @param fn The operation; it may return the backend's timing.
   */
  run(fn: () => OpTiming | void): void {
    this.start();
    let timing;
    try {
      timing = fn();
    } catch (err) {
      this.fail(err);
      throw err;
    }
    this.end(timing);
  }

  /**
   * Marks it finished, or failed with `err`.
   *
   * @param err Its error, if it failed.
   */
  settle(err?: unknown): void {
    if (err === undefined) this.end();
    else this.fail(err);
  }

  /** Marks it failed. */
  fail(err: unknown): void {
    if (this.#entry) {
      this.#entry.finishedUs = nowUs();
      this.#entry.error = err instanceof Error ? err.message : String(err);
    }
  }
}

const NOTHING = new Tracked(null, null);

/**
 * Records an operation as enqueued now, in the ledger and (when profiling) for the timeline,
 * taking the tag set by `tagNext` (DDP's bucket index).
 *
 * @param fields What it is.
 * @param extra Details for the timeline.
 * @returns The handle to mark it started, finished or failed.
 */
export function track(
  fields: TrackFields,
  extra: Record<string, unknown> = {},
): Tracked {
  const entry = ledgerAppend(fields);
  const tag = profiling()
    ? {
      op: fields.op,
      bytes: fields.bytes,
      ...takeTag(),
      ...extra,
      ...(entry ? { seq: entry.seq } : {}),
    }
    : null;
  return entry === null && tag === null ? NOTHING : new Tracked(entry, tag);
}

/**
 * {@linkcode track} for an operation on a tensor: its dtype, and its shape (dtrain's Tensor has
 * one) or else its element count.
 *
 * @param group The group's name.
 * @param op The operation.
 * @param t Its tensor (the input, for a gather or a scatter), if any.
 * @param bytes The bytes it moves.
 * @param extra Details for the timeline.
 */
export function trackTensor(
  group: string,
  op: string,
  t: TensorLike | undefined,
  bytes: number,
  extra?: Record<string, unknown>,
): Tracked {
  const dims = t === undefined ? [] : (t as { shape?: readonly number[] }).shape;
  const shape = Array.isArray(dims)
    ? [...dims]
    : [typeof t!.numel === "function" ? t!.numel() : t!.numel];
  return track({ group, op, dtype: t?.dtype ?? "", shape, bytes }, extra);
}

/**
 * {@linkcode trackTensor} for a point-to-point operation (send, recv): it is numbered in the
 * stream of its pair of ranks within the group (`world 0-1`), which both ends count alike, so
 * that the diagnosis can match a send with its recv.
 *
 * @param group The group's name.
 * @param op "send", "recv", ...
 * @param t Its tensor.
 * @param bytes The bytes it moves.
 * @param me This rank (global).
 * @param peer The other end (global).
 * @param tag The message's tag, for the timeline.
 */
export function trackPointToPoint(
  group: string,
  op: string,
  t: TensorLike,
  bytes: number,
  me: number,
  peer: number,
  tag = 0,
): Tracked {
  const [lo, hi] = me < peer ? [me, peer] : [peer, me];
  const pair = `${group} ${lo}-${hi}`;
  ledgerGroup(pair, [lo, hi]);
  const tracked = trackTensor(pair, op, t, bytes, { peer, tag });
  tracked.peer(peer);
  return tracked;
}
