/**
 * What the ledgers of a job's ranks say went wrong: each rank's summary (its last finished and
 * its pending operations with their call sites), and from all of them one diagnosis that names
 * the culprit in its first line. The same analysis serves a failing rank (summaries exchanged
 * through the store, ledger_exchange.ts), the launcher and `deno task debug` (ledger files).
 * @module
 */

import { entryJson, ledgerEntries, type LedgerEntry, ledgerGroups } from "./ledger.ts";
import { nowUs } from "../profile/tracer.ts";

/** One operation, as a summary shows it. */
export interface OpBrief {
  group: string;
  seq: number;
  op: string;
  /** `file:line` of the call. */
  site: string;
  state: "done" | "pending" | "failed";
  /** When it was enqueued (microseconds since the epoch). */
  enqueuedUs: number;
  /** When it finished or failed (0 while pending). */
  finishedUs: number;
  error?: string;
}

/** Where one rank stands in one group. */
export interface GroupState {
  /** The group's members (global ranks). */
  ranks: number[];
  /** The highest sequence number it enqueued. */
  reached: number;
  /** Its last few operations, oldest first (the last finished one among them). */
  recent: OpBrief[];
}

/** Where one rank stands, per group. */
export interface RankSummary {
  rank: number;
  pid: number;
  host: string;
  /** When the summary was taken (microseconds since the epoch). */
  atUs: number;
  groups: Record<string, GroupState>;
}

const RECENT = 4;

function brief(e: LedgerEntry): OpBrief {
  const { group, seq, op, site, enqueuedUs, finishedUs, error } = entryJson(e);
  const state = finishedUs === 0 ? "pending" : error === undefined ? "done" : "failed";
  return { group, seq, op, site, state, enqueuedUs, finishedUs, ...(error ? { error } : {}) };
}

/**
 * This rank's summary, from its ledger.
 *
 * @param rank Its global rank.
 */
export function summarize(rank: number): RankSummary {
  const groups: Record<string, GroupState> = {};
  const byGroup = new Map<string, LedgerEntry[]>();
  for (const e of ledgerEntries()) {
    if (!byGroup.has(e.group)) byGroup.set(e.group, []);
    byGroup.get(e.group)!.push(e);
  }
  for (const [name, entries] of byGroup) {
    const lastDone = entries.findLastIndex((e) => e.finishedUs > 0 && e.error === undefined);
    const from = Math.max(0, Math.min(lastDone, entries.length - RECENT));
    groups[name] = {
      ranks: ledgerGroups().get(name) ?? [],
      reached: entries[entries.length - 1].seq,
      recent: entries.slice(from).slice(0, RECENT + 1).map(brief),
    };
  }
  return { rank, pid: Deno.pid, host: Deno.hostname(), atUs: nowUs(), groups };
}

const name = (o: OpBrief) => `${o.op} #${o.seq}${o.group === "world" ? "" : ` of ${o.group}`}`;
const named = (o: OpBrief) => `${name(o)} (${o.site})`;
const ranksText = (rs: number[]) => `rank${rs.length > 1 ? "s" : ""} ${rs.join(", ")}`;
const secs = (us: number) => `${(us / 1e6).toFixed(1)} s`;

/** The first line of a diagnosis that found nobody behind. */
export const NO_CULPRIT = "the ledgers show no rank behind the others";

/** Facts known besides the summaries. */
export interface Facts {
  /** Ranks known to have died (left the store, exited). */
  dead?: number[];
  /** Why a rank without a summary (and not known dead) gave none; default: it did not answer. */
  silentWhy?: string;
}

/** The operation `s` waits in (pending, or failed as the report was taken), oldest first. */
function waitingIn(s: RankSummary): OpBrief | undefined {
  return Object.values(s.groups)
    .flatMap((g) => g.recent.filter((o) => o.state !== "done" && o.seq === g.reached))
    .sort((a, b) => a.enqueuedUs - b.enqueuedUs)[0];
}

/** What `s` is doing, in words: where it waits, else its last operation. */
function stateOf(s: RankSummary): string {
  const pending = waitingIn(s);
  if (pending) return `it is waiting in ${named(pending)}`;
  const last = Object.values(s.groups).flatMap((g) => g.recent)
    .sort((a, b) => b.finishedUs - a.finishedUs)[0];
  if (!last) return "it has issued no operation";
  return `its last operation was ${named(last)}, ${
    last.state === "failed" ? "failed" : "finished"
  } ${secs(s.atUs - last.finishedUs)} before this report`;
}

/** What must match across ranks: a send's counterpart is a recv. */
const kind = (op: string) => (/^i?(send|recv)$/.test(op) ? "p2p" : op);

function opAt(s: RankSummary, group: string, seq: number): OpBrief | undefined {
  return s.groups[group]?.recent.find((o) => o.seq === seq);
}

/** The culprit sentence for one group, or null when its members agree. */
function groupCulprit(
  group: string,
  members: number[],
  summaries: ReadonlyMap<number, RankSummary | null>,
  dead: Set<number>,
  silentWhy: string,
): string | null {
  const known = members.filter((r) => summaries.get(r));
  if (known.length === 0) return null;
  const reached = (r: number) => summaries.get(r)!.groups[group]?.reached ?? 0;
  const top = Math.max(...known.map(reached));
  const ahead = known.filter((r) => reached(r) === top);
  const topOp = opAt(summaries.get(ahead[0])!, group, top);
  // Two ranks at the same sequence number with different operations: a different order.
  for (const r of ahead) {
    const mine = opAt(summaries.get(r)!, group, top);
    if (topOp && mine && kind(mine.op) !== kind(topOp.op)) {
      const same = ahead.filter((x) =>
        kind(opAt(summaries.get(x)!, group, top)?.op ?? "") === kind(topOp.op)
      );
      return `${ranksText([r])} called ${named(mine)} where ${ranksText(same)} called ${
        named(topOp)
      }`;
    }
  }
  const silent = members.filter((r) => !summaries.get(r));
  if (silent.length > 0 && topOp && topOp.state !== "done") {
    const waiting = known.map((r) => waitingIn(summaries.get(r)!))
      .filter((o): o is OpBrief => o !== undefined && o.group === group)
      .sort((a, b) => a.seq - b.seq)[0] ?? topOp;
    const why = silent.every((r) => dead.has(r)) ? "died" : silentWhy;
    return `${ranksText(silent)} ${why}; ${ranksText(known)} ${
      known.length > 1 ? "wait" : "waits"
    } for ${silent.length > 1 ? "them" : "it"} in ${named(waiting)}`;
  }
  const behind = known.filter((r) => reached(r) < top);
  if (behind.length > 0 && topOp) {
    const r = behind[0];
    return `${ranksText([r])} never called ${named(topOp)}; ${stateOf(summaries.get(r)!)}`;
  }
  return null;
}

/**
 * The diagnosis of a job from its ranks' summaries: the culprit sentence, then a line per rank.
 *
 * @param summaries Each rank's summary, or null where none came (dead, stopped, no file).
 * @param facts What else is known (ranks that died).
 * @returns The lines; the first names the culprit (or says that none was found).
 */
export function analyze(
  summaries: ReadonlyMap<number, RankSummary | null>,
  facts: Facts = {},
): string[] {
  const dead = new Set(facts.dead ?? []);
  const groups = new Map<string, number[]>();
  for (const s of summaries.values()) {
    for (const [g, state] of Object.entries(s?.groups ?? {})) {
      if (!groups.has(g) || groups.get(g)!.length === 0) groups.set(g, state.ranks);
    }
  }
  // The world first: a subgroup's stall is usually the world's culprit seen from elsewhere.
  const order = [...groups.keys()].sort((a, b) => (a === "world" ? -1 : b === "world" ? 1 : 0));
  let culprit: string | null = null;
  for (const g of order) {
    const members = groups.get(g)!.length ? groups.get(g)! : [...summaries.keys()];
    // A group with members that were not asked (a subgroup's mismatch) is not judged on them.
    if (members.some((r) => !summaries.has(r))) continue;
    const why = facts.silentWhy ?? "did not answer (stopped, hung, or blocked outside JavaScript)";
    culprit = groupCulprit(g, members, summaries, dead, why);
    if (culprit) break;
  }
  const lines = [culprit ?? NO_CULPRIT];
  for (const [rank, s] of [...summaries].sort((a, b) => a[0] - b[0])) {
    if (!s) {
      lines.push(`rank ${rank}: ${dead.has(rank) ? "died; " : ""}no ledger`);
      continue;
    }
    const parts = Object.values(s.groups).map((g) => {
      const last = g.recent.findLast((o) => o.state === "done");
      const pending = g.recent.filter((o) => o.state !== "done");
      const tail = pending.map((o) =>
        `${o.state} ${named(o)}${
          o.state === "pending" ? ` for ${secs(s.atUs - o.enqueuedUs)}` : ""
        }`
      );
      return [last ? `last finished ${named(last)}` : "nothing finished", ...tail].join("; ");
    });
    lines.push(`rank ${rank} (pid ${s.pid} on ${s.host}): ${parts.join(" | ") || "no operations"}`);
  }
  return lines;
}
