/**
 * Keeps a launched worker from outliving its launcher: when the launcher process is gone (even
 * killed with SIGKILL, which it cannot forward), the worker notices that its parent changed and
 * exits. Polls on an unreferenced timer, so it never keeps a finished worker alive.
 * @module
 */

import process from "node:process";

let started = false;

/**
 * Starts watching the launcher when this process was started by one (env `DTRAIN_LAUNCHER_PID`).
 * Safe to call more than once.
 *
 * @param intervalMs How often to check.
 */
export function watchLauncher(intervalMs = 500): void {
  const launcher = Deno.env.get("DTRAIN_LAUNCHER_PID");
  if (started || launcher === undefined) return;
  started = true;
  const timer = setInterval(() => {
    if (String(process.ppid) !== launcher) {
      console.error(
        `worker ${Deno.env.get("RANK") ?? "?"}: launcher (pid ${launcher}) is gone; exiting`,
      );
      Deno.exit(1);
    }
  }, intervalMs);
  Deno.unrefTimer(timer);
}
