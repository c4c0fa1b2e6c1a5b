/**
 * The ledger files of a launched job: each rank writes `rank_<N>.ledger.json` to
 * DTRAIN_LEDGER_DIR (the launcher sets it to the run's log folder) when a collective fails, when
 * the launcher asks (without stopping) and when it leaves the job; the launcher and `deno task debug` read
 * them back and print the same diagnosis as the ranks did.
 * @module
 */

import { join } from "node:path";
import { writeTextFileAtomic } from "../io/private_files.ts";
import { summarize } from "./ledger_analysis.ts";
import { entryJson, ledgerEntries, ledgerOn } from "./ledger.ts";

/** DTRAIN_LEDGER_DIR (set by the launcher to the run's log folder), or null. */
export function ledgerDir(): string | null {
  try {
    return Deno.env.get("DTRAIN_LEDGER_DIR") || null;
  } catch {
    return null;
  }
}

/** The ledger file of `rank` in `dir`. */
export function ledgerFile(dir: string, rank: number): string {
  return join(dir, `rank_${rank}.ledger.json`);
}

/**
 * Writes this rank's ledger (its summary, every entry, the stacks of pending ones) to
 * DTRAIN_LEDGER_DIR, if set. Never throws: a diagnosis must not fail for want of a disk.
 *
 * @param rank This rank.
 * @param why What asked ("failure", "exit", "request": the launcher, "peer": a failing rank).
 */
export function writeLedgerFile(rank: number, why: string): void {
  const dir = ledgerDir();
  if (dir === null || !ledgerOn()) return;
  try {
    const entries = ledgerEntries().map((e) => entryJson(e, e.finishedUs === 0));
    const body = { why, summary: summarize(rank), entries };
    const path = ledgerFile(dir, rank);
    // Never through a link planted at the name or its temporary (io/private_files.ts).
    writeTextFileAtomic(path, JSON.stringify(body));
  } catch {
    // Best effort.
  }
}

/**
 * Writes this rank's ledger when it leaves the job (destroyProcessGroup) or exits.
 *
 * @param rank This rank.
 * @returns A function that writes it now and stops waiting for the exit.
 */
export function writeLedgerAtExit(rank: number): () => void {
  if (ledgerDir() === null || !ledgerOn()) return () => {};
  const onExit = () => writeLedgerFile(rank, "exit");
  globalThis.addEventListener("unload", onExit);
  return () => {
    globalThis.removeEventListener("unload", onExit);
    onExit();
  };
}

/** The file whose change asks every worker of the job to write its ledger (the launcher's SIGUSR1). */
export function ledgerRequestFile(dir: string): string {
  return join(dir, "ledger.request");
}

/** How often a worker looks at the request file. */
const REQUEST_POLL_MS = 250;
let watching = false;

/**
 * In a launched worker (DTRAIN_LEDGER_DIR set): each time the launcher touches the request file,
 * the worker writes its ledger, pending operations with their stacks, and goes on. A file, not a
 * signal: Deno (2.9.2 on) answers SIGUSR1 by opening its inspector on 127.0.0.1:9229, which a
 * worker must not do. Installed by the worker bootstrap; an unreferenced timer, so it keeps
 * nothing alive.
 */
export function writeLedgerOnRequest(): void {
  const dir = ledgerDir();
  if (watching || dir === null) return;
  watching = true;
  const rank = Number(Deno.env.get("RANK") ?? 0);
  const file = ledgerRequestFile(dir);
  const stamp = () => {
    try {
      return Deno.statSync(file).mtime?.getTime() ?? 0;
    } catch {
      return 0;
    }
  };
  // A request from before this worker started is not for it.
  let seen = stamp();
  Deno.unrefTimer(setInterval(() => {
    const now = stamp();
    if (now === seen) return;
    seen = now;
    writeLedgerFile(rank, "request");
  }, REQUEST_POLL_MS));
}
