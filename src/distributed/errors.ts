/**
 * The one error type of `dist`: a message that names the operation, the rank and the value,
 * plus a machine-readable `code`.
 * @module
 */

import { CollectiveStatus } from "../../ffi/collective_codes.ts";

/**
 * What went wrong, for code that wants to react (retry a store connection, restart a job):
 * - `invalid`: a bad argument, detected before anything was sent;
 * - `timeout`: a peer or the store did not answer in time;
 * - `peer`: a connection to a peer failed (it died or reset);
 * - `mismatch`: ranks called different collectives (see the fingerprint check);
 * - `store`: the rendezvous store refused or failed;
 * - `broken`: the process group failed earlier and can no longer be used;
 * - `internal`: anything else.
 */
export type DistErrorCode =
  | "invalid"
  | "timeout"
  | "peer"
  | "mismatch"
  | "store"
  | "broken"
  | "internal";

/**
 * An error from the distributed layer.
 *
 * @example Reacting to a timeout
 * ```ts
 * import assert from "node:assert/strict";
 * import { DistError } from "./errors.ts";
 * const err: unknown = new DistError("timeout", "barrier (op #3): timed out after 5000 ms");
 * assert.ok(err instanceof DistError && err.code === "timeout");
 * assert.equal(err.message, "barrier (op #3): timed out after 5000 ms");
 * ```
 */
export class DistError extends Error {
  /** What kind of failure this is. */
  readonly code: DistErrorCode;

  /**
   * Creates a `DistError`.
   *
   * @param code What kind of failure this is.
   * @param message What failed, naming the thing and the value.
   * @param options The underlying cause, if any.
   */
  constructor(code: DistErrorCode, message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "DistError";
    this.code = code;
  }
}

/**
 * The code each status of a native collective shim becomes (Gloo, shared memory and NCCL share
 * their statuses: ffi/collective_codes.ts).
 * @ignore dtrain-internal (its module is re-exported with `export *`)
 */
export const STATUS_CODES: Readonly<Record<number, DistErrorCode>> = {
  [CollectiveStatus.EINVAL]: "invalid",
  [CollectiveStatus.ETIMEOUT]: "timeout",
  [CollectiveStatus.EPEER]: "peer",
  [CollectiveStatus.EMISMATCH]: "mismatch",
  [CollectiveStatus.ESTORE]: "store",
  [CollectiveStatus.EBROKEN]: "broken",
  [CollectiveStatus.EINTERNAL]: "internal",
};
