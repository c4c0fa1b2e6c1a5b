/**
 * Process lifetime of a job: a launched worker never outlives its launcher, a launcher never
 * outlives whoever started it, and a store host can hold as many sockets as the system allows.
 * The worker side of the launcher contract lives here, in dist, because dist defines that
 * contract (the environment a launched rank gets); the launcher only sets it.
 * @module
 */

import process from "node:process";
import { libc, PR_SET_PDEATHSIG, RLIMIT_NOFILE } from "../../ffi/libc.ts";

const SIGNALS = { SIGKILL: 9, SIGTERM: 15 } as const;

/**
 * Asks the kernel to send `signal` to this process when its parent dies (Linux's
 * PR_SET_PDEATHSIG), which works even when the parent is SIGKILLed and whatever this process runs.
 *
 * @param signal The signal to receive.
 * @returns Whether the kernel took the request (false off Linux or without FFI permission).
 */
export function exitWithParent(signal: keyof typeof SIGNALS): boolean {
  const c = libc();
  return c !== null && c.prctl(PR_SET_PDEATHSIG, BigInt(SIGNALS[signal]), 0n, 0n, 0n) === 0;
}

let guarded = false;

/**
 * Makes a process started by the launcher (env `DTRAIN_LAUNCHER_PID`) die with it: a
 * parent-death SIGKILL, a check that the launcher did not die before that was set, and a poll of
 * the parent pid on an unreferenced timer where the kernel cannot help. Called once, by the
 * bootstrap module the launcher preloads before each worker's script. Safe to call again.
 *
 * @param intervalMs How often the fallback poll checks the parent.
 */
export function guardLaunchedWorker(intervalMs = 500): void {
  const launcher = Deno.env.get("DTRAIN_LAUNCHER_PID");
  if (guarded || launcher === undefined) return;
  guarded = true;
  const orphaned = () => {
    if (String(process.ppid) === launcher) return;
    console.error(
      `worker ${Deno.env.get("RANK") ?? "?"}: launcher (pid ${launcher}) is gone; exiting`,
    );
    Deno.exit(1);
  };
  exitWithParent("SIGKILL");
  orphaned(); // the launcher may have died before the kernel was asked to watch it
  Deno.unrefTimer(setInterval(orphaned, intervalMs));
}

/**
 * Raises this process's soft limit of open files to its hard limit, so that a store host does
 * not run out of descriptors at the distribution's default soft limit (often 1024).
 *
 * @returns The soft limit now in force, or null where it cannot be read.
 */
export function raiseFileLimit(): number | null {
  const c = libc();
  if (c === null) return null;
  const limits = new BigUint64Array(2);
  const bytes = new Uint8Array(limits.buffer);
  if (c.getrlimit(RLIMIT_NOFILE, bytes) !== 0) return null;
  if (limits[0] < limits[1]) {
    limits[0] = limits[1];
    c.setrlimit(RLIMIT_NOFILE, bytes);
    c.getrlimit(RLIMIT_NOFILE, bytes);
  }
  return Number(limits[0]);
}
