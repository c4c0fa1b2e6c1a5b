/**
 * Who is slow while nothing hangs, without synchronized clocks.
 *
 * [Note: straggler lag from waits]
 * A rank's wait inside a collective (from its turn to the end, in its own ledger) is the transfer
 * plus the time from its own arrival to the last rank's: wait_r = transfer + (last − arrival_r).
 * So wait_max − wait_r = arrival_r − arrival_first: how late rank r came, from durations each rank
 * measured on its own clock. Every so often the ranks exchange the waits of their last collectives
 * of a group with one small allGather (never per collective), and each collective's lateness per
 * rank, averaged over the window, names the slowest rank and its mean lag.
 * @module
 */

import { ledgerEntries, ledgerOn, ledgerSeq } from "./ledger.ts";
import type { TensorLike } from "./backend.ts";
import { isInitialized, worldGroup } from "./init.ts";
import type { ProcessGroup } from "./process_group.ts";

/** Who arrived last, on average, at a group's recent collectives. */
export interface StragglerReport {
  /** The slowest rank (global). */
  rank: number;
  /** Its mean lateness behind the first arrival, in milliseconds. */
  meanLagMs: number;
  /** Every member's mean lateness, in group rank order, in milliseconds. */
  lagMs: number[];
  /** How many collectives the means are over. */
  collectives: number;
  /** The collective it was latest at, and its call site: `allReduce #12 (train.ts:57)`. */
  worst: string;
}

function f32(data: Float32Array): TensorLike {
  return {
    dtype: "f32",
    numel: data.length,
    isContiguous: () => true,
    ptr: Deno.UnsafePointer.of(data as Float32Array<ArrayBuffer>),
  };
}

/**
 * This rank's waits (milliseconds) at the group's last `window` collectives, by sequence number
 * up to `last`; NaN where the ledger has none (pending, failed, dropped from the ring).
 */
function waits(group: string, last: number, window: number): Float32Array {
  const out = new Float32Array(window).fill(NaN);
  for (const e of ledgerEntries()) {
    const i = e.seq - (last - window + 1);
    if (e.group !== group || i < 0 || i >= window) continue;
    if (e.finishedUs > 0 && e.error === undefined) {
      out[i] = (e.finishedUs - (e.startedUs || e.enqueuedUs)) / 1000;
    }
  }
  return out;
}

/**
 * The lateness of every member at each collective where all measured a wait, averaged.
 *
 * @param all The members' waits, member after member, `window` each.
 * @param size The members.
 * @param window Collectives per member.
 * @returns Each member's mean lateness (ms), the collectives counted, and the index of the
 *   collective each was latest at (-1: none).
 */
export function meanLateness(
  all: Float32Array,
  size: number,
  window: number,
): { lagMs: number[]; collectives: number; worst: number[] } {
  const lag = new Array<number>(size).fill(0);
  const worst = new Array<number>(size).fill(-1);
  const most = new Array<number>(size).fill(-1);
  let counted = 0;
  for (let c = 0; c < window; c++) {
    const w = Array.from({ length: size }, (_, r) => all[r * window + c]);
    if (w.some((x) => Number.isNaN(x))) continue;
    const max = Math.max(...w);
    w.forEach((x, r) => {
      lag[r] += max - x;
      if (max - x > most[r]) [most[r], worst[r]] = [max - x, c];
    });
    counted++;
  }
  return { lagMs: lag.map((l) => (counted ? l / counted : 0)), collectives: counted, worst };
}

/**
 * Exchanges the waits of `group`'s last `window` collectives (one allGather, itself recorded)
 * and says which rank came last on average. A collective call: every member calls it at the same
 * point (a step boundary), with nothing of the group in flight.
 *
 * @param group The group.
 * @param window How many of its recent collectives to look at.
 * @returns The report, or null when the ledger is off or there is nothing to compare yet.
 */
export async function findStragglers(
  group: ProcessGroup,
  window = 64,
): Promise<StragglerReport | null> {
  if (!ledgerOn() || group.size < 2 || group.rank < 0) return null;
  const last = ledgerSeq(group.name);
  if (last === 0) return null;
  const mine = waits(group.name, last, window);
  const all = new Float32Array(window * group.size);
  await group.allGather(f32(all), f32(mine));
  const { lagMs, collectives, worst } = meanLateness(all, group.size, window);
  if (collectives === 0) return null;
  const slowest = lagMs.indexOf(Math.max(...lagMs));
  const seq = last - window + 1 + worst[slowest];
  const at = ledgerEntries().find((e) => e.group === group.name && e.seq === seq);
  return {
    rank: group.ranks[slowest],
    meanLagMs: lagMs[slowest],
    lagMs,
    collectives,
    worst: at ? `${at.op} #${at.seq} (${at.site.text})` : "?",
  };
}

/**
 * For a training loop: the straggler report of `group` (default: the world, when initialized);
 * rank 0 prints the slowest rank when its mean lag passes `thresholdMs` (0: off, no exchange).
 * A collective call, as {@linkcode findStragglers}.
 *
 * @param thresholdMs The lag worth a line (`--straggler-ms`).
 * @param step The step, for the line.
 * @param group The group.
 * @param print Where the line goes (default stderr).
 * @returns The report.
 */
export async function warnStragglers(
  thresholdMs: number,
  step: number,
  group: ProcessGroup | null = isInitialized() ? worldGroup() : null,
  print: (line: string) => void = console.error,
): Promise<StragglerReport | null> {
  if (thresholdMs <= 0 || group === null) return null;
  const report = await findStragglers(group);
  if (report && report.meanLagMs > thresholdMs && group.rank === 0) {
    print(
      `step ${step}: straggler: rank ${report.rank} arrives ${report.meanLagMs.toFixed(1)} ms ` +
        `after the first on average over the last ${report.collectives} collectives, latest at ` +
        report.worst,
    );
  }
  return report;
}
