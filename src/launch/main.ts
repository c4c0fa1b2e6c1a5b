/**
 * `deno task launch`: the torchrun-style entry point.
 * @module
 */

import { DistError } from "../distributed/errors.ts";
import { holdDumpSignal } from "./dump_signal.ts";
import { discardProfile, unwritableTrace } from "../profile/tracer.ts";
import { launch } from "./launcher.ts";
import { LAUNCH_USAGE, LaunchArgsError, parseLaunchArgs } from "./options.ts";

if (import.meta.main) {
  // First, before anything that must not happen twice: this may re-execute the process.
  holdDumpSignal();
  let options;
  try {
    options = parseLaunchArgs(Deno.args);
  } catch (error) {
    if (!(error instanceof LaunchArgsError)) throw error;
    console.error(`launch: ${error.message}\n\n${LAUNCH_USAGE}`);
    Deno.exit(2);
  }
  if (options === "help") {
    console.log(LAUNCH_USAGE);
    Deno.exit(0);
  }
  // The ranks write their timelines at the end of the run: a path they cannot write is refused now.
  const trace = Deno.env.get("DTRAIN_PROFILE");
  const unwritable = trace ? unwritableTrace(trace) : null;
  if (unwritable !== null) {
    discardProfile();
    console.error(`launch: DTRAIN_PROFILE: ${unwritable}`);
    Deno.exit(2);
  }
  try {
    Deno.exit(await launch(options));
  } catch (error) {
    console.error((error as Error).message);
    // A bad setting (e.g. a DTRAIN_TOKEN that checkToken refuses) is a usage error, as above.
    Deno.exit(error instanceof DistError && error.code === "invalid" ? 2 : 1);
  }
}
