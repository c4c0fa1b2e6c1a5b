/**
 * The launcher's side of the flight recorder (src/distributed/ledger.ts): its workers write their
 * ledgers into the run's log folder; after a failed run, and on SIGUSR1 while the job runs, it
 * prints the diagnosis of those files, as `deno task debug LOG_DIR` does afterwards. It asks them
 * through a file (`writeLedgerOnRequest`), not by passing the signal on: Deno opens its
 * inspector on SIGUSR1.
 * @module
 */

import { resolve } from "node:path";
import { formatDiagnosis } from "../distributed/ledger_exchange.ts";
import { ledgerFile, ledgerRequestFile } from "../distributed/ledger_files.ts";
import { diagnoseLedgerDir, readLedgerDir } from "../distributed/ledger_read.ts";
import { NO_CULPRIT } from "../distributed/ledger_analysis.ts";
import { writeTextFileAtomic } from "../io/private_files.ts";

/** Where the workers write their ledgers: DTRAIN_LEDGER_DIR if set, else the log folder. */
export function ledgerDirOf(logDir: string): string {
  return Deno.env.get("DTRAIN_LEDGER_DIR") || resolve(logDir);
}

/** Removes a previous run's ledger of `rank`, so that it cannot pass for this run's. */
export function removeLedgerFile(dir: string, rank: number): void {
  try {
    Deno.removeSync(ledgerFile(dir, rank));
  } catch {
    // None.
  }
}

/**
 * Prints the diagnosis of the ledgers in the log folder: after a failure only when it names a
 * culprit (a failure outside collectives has none), on request always.
 *
 * @param logDir The run's log folder.
 * @param ranks The ranks whose ledgers to read.
 * @param who Whom the diagnosis says it is from.
 */
export function printLedgerDiagnosis(logDir: string, ranks: number[], who = "launch"): void {
  const lines = diagnoseLedgerDir(ledgerDirOf(logDir), ranks);
  if (lines === null || (lines[0] === NO_CULPRIT && who === "launch")) return;
  console.error(formatDiagnosis(who, lines));
}

/**
 * Asks this node's workers to write their ledgers (they go on; see `writeLedgerOnRequest`) by
 * touching the request file, and waits, at most `waitMs`, until each of `ranks` has.
 *
 * @param ranks The workers still running.
 * @param dir Where they write.
 * @param waitMs The longest wait.
 * @returns How many of how many wrote.
 */
export async function askForLedgers(
  ranks: number[],
  dir: string,
  waitMs: number,
): Promise<{ written: number; asked: number }> {
  // With the ledger off nobody writes one.
  if (Deno.env.get("DTRAIN_LEDGER") === "0" || ranks.length === 0) return { written: 0, asked: 0 };
  const since = Date.now() - 1;
  writeTextFileAtomic(ledgerRequestFile(dir), `${since}\n`); // never through a planted link
  const fresh = () =>
    [...readLedgerDir(dir, ranks).files.values()]
      .filter((f) => f?.why === "request" && f.summary.atUs / 1000 >= since).length;
  while (fresh() < ranks.length && Date.now() - since < waitMs) {
    await new Promise((r) => setTimeout(r, 50));
  }
  return { written: fresh(), asked: ranks.length };
}

/**
 * SIGUSR1 to the launcher: every worker writes its ledger and the stacks of what it waits in
 * (without stopping), then the launcher prints the diagnosis of the files.
 *
 * @param running This node's workers still running.
 * @param logDir The run's log folder.
 * @param ranks This node's ranks.
 */
export async function dumpLedgers(
  running: number[],
  logDir: string,
  ranks: number[],
): Promise<void> {
  const dir = ledgerDirOf(logDir);
  const { written, asked } = await askForLedgers(running, dir, 2000);
  if (asked === 0) return;
  console.error(`launch: SIGUSR1: ${written}/${asked} ledgers written to ${dir}`);
  printLedgerDiagnosis(logDir, ranks, "launch, SIGUSR1");
}
