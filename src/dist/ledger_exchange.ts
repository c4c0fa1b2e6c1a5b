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
 * the members' until each has answered or `untilMs` (Date.now()) passes.
 *
 * @returns Each member's summary, or null where none came.
 */
export async function exchangeSummaries(
  store: StoreClient,
  prefix: string,
  event: string,
  me: number,
  members: readonly number[],
  untilMs: number,
  request: boolean,
): Promise<Map<number, RankSummary | null>> {
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
    const waiting = members.filter((r) => got.get(r) === null && alive.has(r));
    if (waiting.length === 0 || Date.now() >= untilMs) return got;
    await new Promise((r) => setTimeout(r, 25));
  }
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
