/**
 * `dist.diagnoseError`: the group's diagnosis of a blocking operation's failure, for the user's
 * `catch` (src/distributed/_pending_diagnosis.ts notes the failures).
 * @module
 */

import { diagnosePending } from "./_pending_diagnosis.ts";

/**
 * Runs the group's diagnosis of an error a blocking collective or a blocking `send`/`recv` threw,
 * which the calling thread could not wait for: every failing rank reports through the store, and
 * the error comes back with who died or hangs ("rank 1 died (left the store without reporting an
 * error)"), while each rank prints the flight recorder's analysis of where every rank stands. Any
 * other error, or one already diagnosed, comes back as it is. Await it in a `catch` before
 * rethrowing; DDP's and FSDP's `backward`, a pipeline schedule's `step` and the train job do.
 *
 * @param err A caught error.
 * @returns The error to report: `err`, or a DistError with the diagnosis's findings added.
 *
 * @example Rethrow a tensor-parallel forward's failure with its diagnosis
 * ```ts ignore
 * import { dist } from "../../mod.ts";
 * try {
 *   model.forward(x, y);
 * } catch (err) {
 *   throw await dist.diagnoseError(err);
 * }
 * ```
 */
export function diagnoseError(err: unknown): Promise<unknown> {
  return diagnosePending(err);
}
