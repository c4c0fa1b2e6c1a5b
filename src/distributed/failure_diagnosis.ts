/**
 * What a rank does when a collective fails: finds through the store which ranks died or hung
 * (see [Note: failure diagnosis] below) and names them in the error every Work rejects with, or,
 * for a mismatch, reports which line of each rank called what.
 * @module
 */

import { DistError } from "./errors.ts";
import type { ResolvedInit } from "./init_method.ts";
import {
  exchangeSummaries,
  FAILURE_EVENT,
  reportDiagnosis,
  reportMismatch,
} from "./ledger_exchange.ts";
import type { ProcessGroup } from "./process_group.ts";
import type { StoreClient } from "./store/client.ts";
import { MAX_TIMEOUT_MS } from "./store/protocol.ts";
import type { StoreServer } from "./store/server.ts";

/** The job as a diagnosis sees it (init.ts's world). */
export interface DiagnosedJob {
  /** This rank's settings: its rank, and whether a launcher hosts the store. */
  config: Pick<ResolvedInit, "rank" | "launcherStore">;
  /** The world group, whose every rank is asked for its ledger. */
  group: Pick<ProcessGroup, "ranks">;
  /** This rank's store client. */
  store: StoreClient;
  /** The store this rank hosts, if it does (it then waits for the others' diagnoses). */
  server: StoreServer | null;
  /** Store key prefix of this initialization. */
  prefix: string;
}

/** Resolves with `work`'s value, or rejects once `ms` (at most `MAX_TIMEOUT_MS`) have passed. */
function within<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer = 0 as unknown as ReturnType<typeof setTimeout>;
  const late = new Promise<never>((_, reject) => {
    const delay = Math.min(ms, MAX_TIMEOUT_MS);
    timer = setTimeout(() => reject(new Error(`no answer within ${delay} ms`)), delay);
  });
  return Promise.race([work, late]).finally(() => clearTimeout(timer));
}

/**
 * [Note: failure diagnosis]
 * Gloo sees only its own sockets. A rank whose neighbour exited because of another rank's
 * death blames the neighbour, a send into a dead peer merely times out, and a timeout in the
 * middle of a transfer names nobody. The store sees every rank: a rank's store connection closes
 * when its process dies. So after a transport failure each rank records its error in the store
 * and polls, for at most DIAGNOSIS_MS, until every other member has either recorded one too or
 * left: members that left without a record died; members still connected without a record by
 * then are hung (a stopped process, a deadlock, a machine that stopped answering). Every rank,
 * the one that hosts the store included, so reports within the collective timeout plus
 * DIAGNOSIS_MS and a few polls. The store host also waits, inside that budget, until the members
 * that reported have finished their own diagnosis, so that its exit does not pull the store from
 * under them.
 */
export async function diagnoseFailure(
  w: DiagnosedJob,
  group: ProcessGroup,
  err: unknown,
): Promise<unknown> {
  if (err instanceof DistError && err.code === "mismatch" && group.rank >= 0) {
    // Every member sees the same mismatch: their ledgers say which line called what.
    await reportMismatch(w.store, w.prefix, group, w.config.rank, err.message);
    return err;
  }
  if (!(err instanceof DistError) || (err.code !== "peer" && err.code !== "timeout")) return err;
  const me = w.config.rank;
  const others = group.ranks.filter((r) => r !== me);
  const failed = (rank: number) => `${w.prefix}failed/${rank}`;
  const diagnosed = (rank: number) => `${w.prefix}diagnosed/${rank}`;
  const has = (key: string) => w.store.get(key, 0).then(() => true, () => false);
  const started = Date.now();
  // Polls until each of `ranks` has set key(rank) or left the store, or the deadline passes.
  const sort = async (ranks: number[], key: (rank: number) => string, until: number) => {
    for (;;) {
      const alive = new Set(await w.store.connectedRanks());
      const verdict = { reported: [] as number[], gone: [] as number[], silent: [] as number[] };
      for (const r of ranks) {
        if (await has(key(r))) verdict.reported.push(r);
        else if (alive.has(r)) verdict.silent.push(r);
        else verdict.gone.push(r);
      }
      if (verdict.silent.length === 0 || Date.now() >= until) return verdict;
      await new Promise((r) => setTimeout(r, POLL_MS));
    }
  };
  const findCulprits = async () => {
    await w.store.set(failed(me), err.message);
    // Asks every rank of the job for its ledger at once (the culprit of a subgroup's stall is
    // often stuck in another group): the hung ones answer from their watchers.
    const until = started + DIAGNOSIS_MS;
    const ledgers = exchangeSummaries(w.store, w.prefix, FAILURE_EVENT, me, w.group.ranks, until);
    const { reported, gone, silent } = await sort(others, failed, until);
    const { summaries, left } = await ledgers;
    reportDiagnosis(me, summaries, { dead: left });
    await w.store.set(diagnosed(me), "1");
    if (w.server) await sort(reported, diagnosed, started + DIAGNOSIS_MS + LINGER_MS);
    return { dead: gone, hung: silent };
  };
  const notes: string[] = [];
  try {
    const { dead, hung } = await within(findCulprits(), DIAGNOSIS_MS + LINGER_MS + POLL_MS);
    const ranks = (rs: number[]) => `rank${rs.length > 1 ? "s" : ""} ${rs.join(", ")}`;
    if (dead.length) notes.push(`${ranks(dead)} died (left the store without reporting an error)`);
    if (hung.length) {
      notes.push(
        `${ranks(hung)} ${hung.length > 1 ? "are" : "is"} hung (still connected, but reported ` +
          `no error within ${DIAGNOSIS_MS / 1000} s)`,
      );
    }
  } catch {
    notes.push(
      w.config.launcherStore
        ? "the launcher's store does not answer either"
        : "the store does not answer either: rank 0, which hosts it, has probably died or hung",
    );
  }
  if (notes.length === 0) return err;
  return new DistError(err.code, `${err.message}; ${notes.join("; ")}`, { cause: err });
}

/**
 * How long a failing rank waits for the other members to report theirs. With LINGER_MS and a
 * poll it bounds the diagnosis at 1.55 s, inside the "timeout + 2 s" every rank reports by
 * (docs/reference/reliability.md) with room for a loaded machine's scheduling.
 */
const DIAGNOSIS_MS = 1200;
/** How much longer the store host waits for the reporting members to finish their diagnosis. */
const LINGER_MS = 300;
/** Store polling interval during a diagnosis. */
const POLL_MS = 50;
