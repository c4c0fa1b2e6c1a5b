/**
 * What the ledger tests share: the worker, the exact `file:line` of each call it marks with a
 * `// site: NAME` comment (as the diagnosis prints it, relative to the repository root the tests
 * run from), and the culprit lines a diagnosis printed.
 * @module
 */

import assert from "node:assert/strict";
import { freePort } from "../_harness/ranks.ts";
import { ROOT, runDeno, type RunOptions, type RunResult } from "../_harness/processes.ts";

/** The worker script, as a path from the repository root. */
export const WORKER_PATH = "tests/distributed/workers/ledger_faults.ts";
/** The worker script's URL, for runRanks. */
export const worker = new URL("./workers/ledger_faults.ts", import.meta.url);

/**
 * `path:line` of the line of `file` that ends with `// site: NAME`.
 *
 * @param name The site's name.
 * @param file The file's URL (default the worker).
 * @param path The file as the diagnosis names it (default the worker's path).
 */
export function site(name: string, file: URL = worker, path = WORKER_PATH): string {
  const line = Deno.readTextFileSync(file).split("\n").findIndex((l) =>
    l.endsWith(`// site: ${name}`)
  );
  assert.ok(line >= 0, `no site '${name}' in ${path}`);
  return `${path}:${line + 1}`;
}

/** `text` with every regular expression character escaped. */
export const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/**
 * The culprit line (the first) of each diagnosis `who` printed in `text`.
 *
 * @param text The output.
 * @param who "rank 0", "launch", "debug", ... (default: any rank).
 */
export function culprits(text: string, who = "rank \\d+"): string[] {
  const head = new RegExp(`dtrain ledger \\(${who}\\): (.*)$`);
  return text.split("\n").map((l) => l.match(head)?.[1]).filter((c): c is string => !!c);
}

/**
 * The launcher running the ledger worker on `nproc` ranks, with `logDir` as its log folder.
 *
 * @param nproc Ranks on this node.
 * @param logDir The launcher's --log-dir.
 * @param options The worker's environment (MODE, ...), the hard limit and the line watcher.
 */
export function launchLedgerWorkers(
  nproc: number,
  logDir: string,
  options: Pick<RunOptions, "env" | "onLine" | "timeoutMs">,
): Promise<RunResult> {
  return runDeno({
    ...options,
    args: [
      `${ROOT}src/launch/main.ts`,
      "--nproc-per-node",
      String(nproc),
      "--master-port",
      String(freePort()),
      "--log-dir",
      logDir,
      WORKER_PATH,
    ],
  });
}
