/**
 * The launcher (dtrain's torchrun): hosts the rendezvous store on node 0, starts one worker
 * process per local rank with the distributed environment, prefixes and logs their output, and
 * supervises them: when one fails it stops the others, then restarts the whole group or reports
 * the first failing rank with the tail of its log. No worker outlives it.
 * @module
 */

import { resolve } from "node:path";
import { DistError } from "../distributed/errors.ts";
import { exitWithParent } from "../distributed/lifetime.ts";
import { StoreServer } from "../distributed/store/server.ts";
import { checkToken, storeReach } from "../distributed/store/token.ts";
import { mergeRankTraces } from "../profile/merge.ts";
import { discardProfile } from "../profile/tracer.ts";
import { watchDumpSignal } from "./dump_signal.ts";
import { runElastic } from "./elastic.ts";
import { dumpLedgers, printLedgerDiagnosis } from "./ledger.ts";
import { BUSY_PORT_HINT, type LaunchOptions } from "./options.ts";
import {
  describeExit,
  FORWARDED_SIGNALS,
  logTail,
  ownLogFolder,
  signalExitCode,
  Supervisor,
} from "./supervisor.ts";

/** Runs the job on this node; resolves to the launcher's exit code. */
export async function launch(options: LaunchOptions): Promise<number> {
  // Killed with its parent (`deno task`, a shell, a scheduler's step), it stops its workers.
  exitWithParent("SIGTERM");
  // Its ranks record the timeline (DTRAIN_PROFILE) and it merges theirs; its own would overwrite
  // the merged trace at exit.
  discardProfile();
  const token = jobToken(options);
  // Without --log-dir the logs go to a temporary folder, removed when the job succeeds: a run
  // that needs them is one that failed, and a folder per run would pile up in the temp dir.
  const temporary = !options.logDir;
  const logDir = options.logDir || await Deno.makeTempDir({ prefix: "dtrain-launch-" });
  ownLogFolder(logDir);
  const store = options.nodeRank === 0 ? hostStore(options, token) : null;
  // Port 0 was a free port: the workers meet on the one the store took.
  if (store !== null) options = { ...options, masterPort: store.port };
  // Said first so that it can be followed while it runs.
  console.error(
    `launch: per-rank logs in ${resolve(logDir)}` +
      (temporary ? " (removed if the job succeeds; --log-dir DIR keeps them)" : ""),
  );
  const supervisor = new Supervisor(options, token, logDir);
  const handlers = FORWARDED_SIGNALS.map((s) => [s, () => supervisor.interrupt(s)] as const);
  for (const [s, h] of handlers) Deno.addSignalListener(s, h);
  // SIGUSR1 asks for a dump; it is held from Deno's inspector ([Note: SIGUSR1 never reaches the
  // inspector] in dump_signal.ts), so it is polled for, not listened to.
  const stopWatching = watchDumpSignal(() =>
    void dumpLedgers(supervisor.runningRanks(), logDir, supervisor.localRanks())
  );
  let code = 1;
  try {
    code = await runAttempts(options, token, supervisor, logDir);
    return code;
  } finally {
    for (const [s, h] of handlers) Deno.removeSignalListener(s, h);
    stopWatching();
    await store?.close();
    // The workers' DTRAIN_PROFILE timelines (one per rank) become one trace file.
    await mergeRankTraces(Deno.env.get("DTRAIN_PROFILE"));
    if (temporary && code === 0) await Deno.remove(logDir, { recursive: true }).catch(() => {});
  }
}

/** Runs the job's attempts (restarts included); resolves to the launcher's exit code. */
async function runAttempts(
  options: LaunchOptions,
  token: string,
  supervisor: Supervisor,
  logDir: string,
): Promise<number> {
  // Elastic jobs, and multi-node jobs that may restart: every node restarts in the same round,
  // and restarts are counted per job, in the store.
  if (options.minNodes < options.nnodes || (options.nnodes > 1 && options.maxRestarts > 0)) {
    return await runElastic(options, token, supervisor);
  }
  for (let attempt = 0; attempt <= options.maxRestarts; attempt++) {
    const failed = await supervisor.runGroup(attempt);
    // Interrupted is interrupted, even when the workers shut down cleanly on the signal.
    if (supervisor.interruptedBy) return signalExitCode(supervisor.interruptedBy);
    if (failed === null) return 0;
    const tail = await logTail(supervisor.logPath(failed.localRank), 20);
    printLedgerDiagnosis(logDir, supervisor.localRanks());
    const how = describeExit(failed);
    if (attempt < options.maxRestarts) {
      console.error(
        `launch: rank ${failed.rank} ${how}; restarting the group (restart ${
          attempt + 1
        }/${options.maxRestarts})`,
      );
      continue;
    }
    console.error(
      `launch: rank ${failed.rank} (local rank ${failed.localRank}) ${how}; ` +
        `last lines of ${supervisor.logPath(failed.localRank)}:\n${tail}`,
    );
    return 1;
  }
  return 1;
}

/**
 * The job's store, on node 0. A busy port is the one mistake a user makes here often (another
 * job on the machine): its error says which flags choose another.
 * @throws DistError (code "store") naming the address, and for a busy port the flags.
 */
function hostStore(options: LaunchOptions, token: string): StoreServer {
  try {
    return StoreServer.listen({ hostname: options.masterAddr, port: options.masterPort, token });
  } catch (error) {
    const busy = error instanceof DistError && error.cause instanceof Deno.errors.AddrInUse;
    if (!busy) throw error;
    throw new DistError("store", `${error.message}; ${BUSY_PORT_HINT}`, { cause: error.cause });
  }
}

/**
 * The job secret: DTRAIN_TOKEN, checked on every node (src/distributed/store/token.ts), or a fresh one
 * for a single-node job.
 */
function jobToken(options: LaunchOptions): string {
  const given = Deno.env.get("DTRAIN_TOKEN");
  const reach = options.nnodes > 1 ? "a multi-node job" : storeReach(options.masterAddr);
  if (given) {
    checkToken(given, "launch", reach);
    return given;
  }
  if (options.nnodes > 1) {
    throw new Error(
      "launch: multi-node jobs need the same secret on every node: set DTRAIN_TOKEN (e.g. `openssl rand -hex 32`)",
    );
  }
  const bytes = crypto.getRandomValues(new Uint8Array(24));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}
