/**
 * Worker script for launcher_test.ts, started by the launcher once per rank. The first argument
 * picks the behaviour:
 * - `env`: print the distributed environment as one JSON line and exit 0;
 * - `fail R`: rank R exits with code 3 after the others are up; the others wait to be stopped;
 * - `fail-once R`: like `fail`, but only in the first attempt; later attempts exit 0;
 * - `wait`: print "ready" and wait (forever) for a signal; a plain script that never touches
 *   dtrain, so only what the launcher preloads can make it exit with the launcher;
 * - `dist-wait`: like `wait`, but it joins the process group first;
 * - `graceful`: like `wait`, but on SIGTERM, SIGINT, SIGHUP or SIGQUIT print which one arrived
 *   and exit 0, as a job that shuts down cleanly does;
 * - `stubborn`: like `wait`, but print and ignore those signals, as a hung job does.
 * @module
 */

import { initProcessGroup } from "../../../src/distributed/mod.ts";

const VARS = [
  "RANK",
  "LOCAL_RANK",
  "WORLD_SIZE",
  "LOCAL_WORLD_SIZE",
  "GROUP_RANK",
  "MASTER_ADDR",
  "MASTER_PORT",
  "DTRAIN_TOKEN",
  "DTRAIN_RESTART_COUNT",
  "OPENBLAS_NUM_THREADS",
] as const;

const [mode, arg] = Deno.args;
const rank = Number(Deno.env.get("RANK"));
const attempt = Number(Deno.env.get("DTRAIN_RESTART_COUNT"));

function waitForever(): void {
  setInterval(() => {}, 1 << 30);
}

switch (mode) {
  case "env":
    console.log(JSON.stringify(Object.fromEntries(VARS.map((v) => [v, Deno.env.get(v) ?? null]))));
    break;
  case "fail":
  case "fail-once": {
    const failing = rank === Number(arg) && (mode === "fail" || attempt === 0);
    console.log(`attempt ${attempt} ready`);
    if (failing) {
      await new Promise((r) => setTimeout(r, 300));
      console.error(`rank ${rank} failing on purpose in attempt ${attempt}`);
      Deno.exit(3);
    }
    if (mode === "fail-once" && attempt > 0) break;
    waitForever();
    break;
  }
  case "wait":
  case "graceful":
  case "stubborn":
    if (mode !== "wait") {
      for (const signal of ["SIGTERM", "SIGINT", "SIGHUP", "SIGQUIT"] as const) {
        Deno.addSignalListener(signal, () => {
          console.log(`got ${signal}`);
          if (mode === "graceful") Deno.exit(0);
        });
      }
    }
    console.log("ready");
    waitForever();
    break;
  case "dist-wait":
    await initProcessGroup();
    console.log("ready");
    waitForever();
    break;
  default:
    console.error(`worker.ts: unknown mode "${mode}"`);
    Deno.exit(64);
}
