/**
 * The launcher's request that its workers stop at their next step boundary, so that an elastic
 * round can end with a snapshot and admit a waiting node: the launcher creates the file that env
 * `DTRAIN_STOP_FILE` names, and the train job's ranks ask {@linkcode stopAgreed} at every step.
 *
 * [Note: stopping at a step boundary]
 * A file, not a signal: a signal that reaches a worker before it listens kills it (SIGUSR1's
 * default action), and a worker that never listens would die of it; a file waits until it is
 * looked for. The ranks of a job look for their own launcher's file at every step, and a
 * one-number all-reduce makes "some rank was asked" the decision of all (as PyTorch Lightning's
 * `reduce_boolean_decision` of a received SIGTERM), so that every rank stops after the same step,
 * whichever node's launcher asked first. Only a round that can grow sets the variable: other jobs
 * pay nothing per step. Stopped workers exit with {@linkcode EXIT_STOPPED}, which tells the
 * launcher "stopped as asked, resume me" apart from "finished" (0) and a failure. A script that
 * never looks for the file runs on; the waiting node then joins the next round, if one comes.
 * @module
 */

import { existsSync } from "node:fs";
import { allReduce } from "../distributed/mod.ts";
import { tensor } from "../tensor/creation.ts";

/** The variable that names the stop file in a worker's environment. */
export const STOP_FILE_ENV = "DTRAIN_STOP_FILE";

/** The exit code of a worker stopped at a step boundary as asked (sysexits' EX_TEMPFAIL). */
export const EXIT_STOPPED = 75;

/**
 * Whether the ranks agree to stop after the step just run: false at once without
 * `DTRAIN_STOP_FILE`, else true when any rank's launcher created its stop file. Every rank of the
 * job calls it at the same steps (it is a collective when the file is named).
 *
 * @param worldSize The number of ranks.
 * @returns Whether every rank is to stop here.
 *
 * @example Without a launcher that may ask, every step goes on
 * ```ts
 * import { equal as assertEquals } from "node:assert/strict";
 * import { stopAgreed } from "./stop_request.ts";
 * Deno.env.delete("DTRAIN_STOP_FILE");
 * assertEquals(await stopAgreed(1), false);
 * ```
 */
export async function stopAgreed(worldSize: number): Promise<boolean> {
  const file = Deno.env.get(STOP_FILE_ENV);
  if (file === undefined) return false;
  const asked = existsSync(file) ? 1 : 0;
  if (worldSize === 1) return asked === 1;
  const flag = tensor([asked]);
  try {
    await allReduce(flag, "max");
    return flag.toArray()[0] > 0;
  } finally {
    flag.dispose();
  }
}
