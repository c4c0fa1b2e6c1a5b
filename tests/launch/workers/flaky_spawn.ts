/**
 * The launcher with a spawn that fails, for launcher_test.ts: the Nth worker spawn (env
 * DTRAIN_TEST_FAIL_SPAWN, from 1) throws, as when the system runs out of processes or files.
 * Otherwise it runs the launcher on its command line like src/launch/main.ts.
 * @module
 */

import { launch } from "../../../src/launch/launcher.ts";
import { parseLaunchArgs } from "../../../src/launch/options.ts";

const failAt = Number(Deno.env.get("DTRAIN_TEST_FAIL_SPAWN"));
let spawns = 0;
Deno.Command = class extends Deno.Command {
  override spawn(): Deno.ChildProcess {
    if (++spawns === failAt) throw new Error(`spawn ${spawns} failed on purpose`);
    return super.spawn();
  }
};

const options = parseLaunchArgs(Deno.args);
if (options === "help") throw new Error("flaky_spawn.ts: --help is not a test");
try {
  Deno.exit(await launch(options));
} catch (error) {
  console.error((error as Error).message);
  Deno.exit(1);
}
