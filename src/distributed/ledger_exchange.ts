/**
 * How ranks share their ledgers when collectives are broken: through the store. A failing rank
 * publishes its summary and asks the others for theirs; a rank that has not failed (it skipped
 * the collective, or waits elsewhere) answers from a watcher on a connection of its own, which
 * waits in the store for the request and keeps nothing alive. The diagnosis is printed on every
 * rank that failed, and each rank writes its ledger to DTRAIN_LEDGER_DIR for the launcher and
 * `deno task debug`.
 * @module
 */

import { analyze, type Facts, type RankSummary, summarize } from "./ledger_analysis.ts";
import { ledgerOn } from "./ledger.ts";
import { writeLedgerFile } from "./ledger_files.ts";
import { StoreClient, type StoreClientOptions } from "./store/client.ts";
import { MAX_TIMEOUT_MS } from "./store/protocol.ts";

/** The event of a job's first timeout or dead peer: every failing rank publishes under it. */
export const FAILURE_EVENT = "failure";

const requestKey = (prefix: string) => `${prefix}ledger/request`;
const summaryKey = (prefix: string, event: string, rank: number) =>
  `${prefix}ledger/${event}/${rank}`;

/**
 * Answers the first request for this rank's ledger summary, from a store connection of its own
 * (unreferenced: it keeps no process alive).
 *
 * @param options How to reach the store.
 * @param prefix The key prefix of this initialization.
 * @param rank This rank.
 * @returns A function that closes the watcher.
 */
export async function watchLedgerRequests(
  options: StoreClientOptions,
  prefix: string,
  rank: number,
): Promise<() => void> {
  if (!ledgerOn()) return () => {};
  const client = await StoreClient.connect({ ...options, rank: -1 });
  client.unref();
  (async () => {
    for (;;) {
      try {
        await client.wait([requestKey(prefix)], MAX_TIMEOUT_MS);
        break;
      } catch (err) {
        if ((err as { code?: string }).code !== "timeout") return;
      }
    }
    const summary = summarize(rank);
    await client.set(summaryKey(prefix, FAILURE_EVENT, rank), JSON.stringify(summary));
    writeLedgerFile(rank, "peer");
  })().catch(() => {}).finally(() => client.close());
  return () => client.close();
}

/**
 * Publishes this rank's summary under `event`, asks for the others' when `request`, and collects
 * the members' until each has answered or left the store, or `untilMs` (Date.now()) passes.
 *
 * @returns Each member's summary (null where none came), and the members that left the store
 *   without one (dead).
 */
export async function exchangeSummaries(
  store: StoreClient,
  prefix: string,
  event: string,
  me: number,
  members: readonly number[],
  untilMs: number,
  request = true,
): Promise<{ summaries: Map<number, RankSummary | null>; left: number[] }> {
  await store.set(summaryKey(prefix, event, me), JSON.stringify(summarize(me)));
  if (request) await store.compareSet(requestKey(prefix), "", event);
  const got = new Map<number, RankSummary | null>(members.map((r) => [r, null]));
  for (;;) {
    for (const r of members) {
      if (got.get(r)) continue;
      try {
        const bytes = await store.get(summaryKey(prefix, event, r), 0);
        got.set(r, JSON.parse(new TextDecoder().decode(bytes)));
      } catch {
        // Not yet.
      }
    }
    const alive = new Set(await store.connectedRanks());
    const missing = members.filter((r) => got.get(r) === null);
    if (missing.every((r) => !alive.has(r)) || Date.now() >= untilMs) {
      return { summaries: got, left: missing.filter((r) => !alive.has(r)) };
    }
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** How long the members of a mismatched collective get to publish their summaries. */
const MISMATCH_MS = 1000;

/**
 * After a mismatched collective, which every member sees: prints the diagnosis of the members'
 * ledgers (which line called what), within MISMATCH_MS and a little; never throws.
 *
 * @param store The store.
 * @param prefix The key prefix of this initialization.
 * @param group The group (its name and members).
 * @param me This rank.
 * @param message The mismatch, the same on every member (it names the event).
 */
export async function reportMismatch(
  store: StoreClient,
  prefix: string,
  group: { name: string; ranks: readonly number[] },
  me: number,
  message: string,
): Promise<void> {
  const event = `mismatch/${group.name}/${message}`;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<null>((r) => (timer = setTimeout(() => r(null), MISMATCH_MS + 500)));
  const got = exchangeSummaries(
    store,
    prefix,
    event,
    me,
    group.ranks,
    Date.now() + MISMATCH_MS,
    false,
  );
  const done = await Promise.race([got.catch(() => null), late]);
  clearTimeout(timer);
  if (done) reportDiagnosis(me, done.summaries, { dead: done.left });
}

/**
 * Prints the diagnosis (stderr, one block) and writes this rank's ledger file.
 *
 * @param rank This rank.
 * @param summaries What the members said.
 * @param facts What else is known.
 * @returns The lines printed.
 */
export function reportDiagnosis(
  rank: number,
  summaries: ReadonlyMap<number, RankSummary | null>,
  facts: Facts,
): string[] {
  const lines = analyze(summaries, facts);
  console.error(formatDiagnosis(`rank ${rank}`, lines));
  writeLedgerFile(rank, "failure");
  return lines;
}

/**
 * The diagnosis as printed: its culprit line, then one line per rank.
 *
 * @param who Who prints it ("rank 1", "launch").
 * @param lines From `analyze`.
 */
export function formatDiagnosis(who: string, lines: string[]): string {
  const [culprit, ...ranks] = lines;
  return [`dtrain ledger (${who}): ${culprit}`, ...ranks.map((l) => `  ${l}`)].join("\n");
}
