/**
 * The diagnosis of a blocking operation's failure, run later. A blocking collective
 * (`allReduceBlocking`, tensor parallelism's gathers) or a blocking `send`/`recv` fails on the
 * calling thread, which cannot wait for the group's diagnosis through the store (who died, who
 * hangs, and every rank's flight recorder: [Note: failure diagnosis] in init.ts). So it notes its
 * error here, and the first code above it that can wait runs the diagnosis: DDP's and FSDP's
 * `backward` ({@linkcode diagnosedOnFailure}), a pipeline schedule's `step`, the train job, or the
 * user's own `catch`, all through `diagnoseError` (blocking_diagnosis.ts, public). Until then the
 * error says what the transport saw.
 * @module
 */

/** What can diagnose a failure of its own: a ProcessGroup. */
interface Diagnoses {
  diagnose(err: unknown): Promise<unknown>;
}

const pending = new WeakMap<object, Diagnoses>();

/**
 * Notes that `err`, thrown by a blocking operation of `group`, has not been diagnosed.
 *
 * @param err The error, as thrown.
 * @param group Its group.
 */
export function diagnoseLater(err: unknown, group: Diagnoses): void {
  if (typeof err === "object" && err !== null && !pending.has(err)) pending.set(err, group);
}

/**
 * Runs a blocking call of `group`; its failure is noted for a diagnosis later.
 *
 * @param group The group the call runs on.
 * @param call The call.
 * @returns What it returns.
 */
export function orDiagnoseLater<T>(group: Diagnoses, call: () => T): T {
  try {
    return call();
  } catch (err) {
    diagnoseLater(err, group);
    throw err;
  }
}

/**
 * `err` with its group's diagnosis when a blocking operation noted it, else `err` itself (once:
 * the note is taken). {@linkcode diagnoseError} in blocking_diagnosis.ts is its public name.
 *
 * @param err A caught error.
 */
export async function diagnosePending(err: unknown): Promise<unknown> {
  if (typeof err !== "object" || err === null) return err;
  const group = pending.get(err);
  if (group === undefined) return err;
  pending.delete(err);
  return await group.diagnose(err);
}

/**
 * `p`, rejecting with its error diagnosed ({@linkcode diagnosePending}): for dtrain's own async
 * calls that run blocking operations (DDP's and FSDP's backward).
 *
 * @param p The call's promise.
 */
export function diagnosedOnFailure<T>(p: Promise<T>): Promise<T> {
  return p.catch(async (err) => {
    throw await diagnosePending(err);
  });
}
