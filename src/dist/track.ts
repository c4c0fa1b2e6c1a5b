/**
 * The one hook every collective and point-to-point operation calls: it feeds both the profile
 * (src/profile/tracer.ts, when on) and the ledger (ledger.ts, on by default), so that a new
 * operation is recorded by one call. It costs one branch when both are off.
 * @module
 */

import type { OpTiming } from "./backend.ts";
import { ledgerAppend, type LedgerEntry } from "./ledger.ts";
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

  /** Marks that its turn came now (the backend may say better at the end). */
  start(): void {
    this.#startUs = nowUs();
    if (this.#entry) this.#entry.startedUs = this.#startUs;
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
 * The shape a tensor-like reports (dtrain's Tensor has one), else its element count.
 *
 * @param t The tensor.
 * @param count Its element count.
 */
export function shapeOf(t: unknown, count: number): number[] {
  const shape = (t as { shape?: readonly number[] } | undefined)?.shape;
  return Array.isArray(shape) ? [...shape] : [count];
}
