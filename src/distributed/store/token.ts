/**
 * The job token's rules, in one place for every entry point that hosts or reaches a store (the
 * launcher, `StoreServer.listen`, `StoreClient.connect`).
 *
 * [Note: how strong a job token must be]
 * A token is 1 to 1024 bytes of UTF-8. Where hosts other than this one can reach the store (a
 * multi-node job, or a store address that is not loopback: 127.0.0.0/8, ::1, localhost) it must
 * also be at least 32 bytes: the length of a random 128-bit value written in hex
 * (`openssl rand -hex 16`; the launcher draws 48 hex digits when DTRAIN_TOKEN is unset on one
 * node). Length is all that can be checked; the 128 bits come from drawing the token at random.
 * The handshake (`auth.ts`) shows a stranger no HMAC of the token before it has proved that it
 * knows it, but someone who records a legitimate exchange (or a fake store that a client talks
 * to) holds an HMAC over known nonces, which a short or guessable token would not survive.
 * Shorter tokens stay allowed for a store on loopback in a single-node job, where only this
 * host's processes can connect.
 * @module
 */

import { DistError } from "../errors.ts";
import { utf8 } from "./protocol.ts";

/** Fewest bytes of a token for a store that other hosts can reach (32 hex digits: 128 bits). */
export const MIN_REACHABLE_TOKEN_BYTES = 32;
/** Longest token, in bytes. */
export const MAX_TOKEN_BYTES = 1024;

/**
 * Whether `hostname` is a loopback address, which only this host's processes can reach.
 *
 * @param hostname A host name or address, IPv6 with or without brackets.
 * @returns True for 127.0.0.0/8 (also IPv4-mapped), ::1 and "localhost".
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { isLoopback } from "./token.ts";
 * assert.equal(isLoopback("127.0.0.1"), true);
 * assert.equal(isLoopback("[::1]"), true);
 * assert.equal(isLoopback("0.0.0.0"), false);
 * ```
 */
export function isLoopback(hostname: string): boolean {
  const h = hostname.toLowerCase().replace(/^\[(.*)\]$/, "$1");
  return h === "localhost" || h === "::1" || /^(::ffff:)?127\.\d+\.\d+\.\d+$/.test(h);
}

/**
 * Why a store at `hostname` is reachable from other hosts, or null if it is on loopback: the
 * `reachable` argument of `checkToken`.
 */
export function storeReach(hostname: string): string | null {
  return isLoopback(hostname) ? null : `the store address ${hostname} is not loopback`;
}

/**
 * Refuses a job token that is empty, too long, or too short to guard a reachable store (see
 * the note above).
 *
 * @param token The job token.
 * @param what Who checks, to start the message with, e.g. "launch".
 * @param reachable Why other hosts can reach the store ("a multi-node job", `storeReach(host)`),
 *   or null when only this host can.
 * @throws DistError (code "invalid") naming the token's length and the rule it breaks.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { checkToken } from "./token.ts";
 * checkToken("t", "demo", null); // a loopback store in a single-node job
 * assert.throws(() => checkToken("t", "demo", "a multi-node job"), /at least 32 bytes/);
 * ```
 */
export function checkToken(token: string, what: string, reachable: string | null): void {
  const bytes = utf8(token).length;
  const fail = (why: string) => {
    throw new DistError("invalid", `${what}: the job token (DTRAIN_TOKEN) ${why}`);
  };
  if (bytes === 0) fail("is empty");
  if (bytes > MAX_TOKEN_BYTES) fail(`is ${bytes} bytes, over the limit of ${MAX_TOKEN_BYTES}`);
  if (reachable !== null && bytes < MIN_REACHABLE_TOKEN_BYTES) {
    fail(
      `is ${bytes} bytes; ${reachable}, so it must be at least ${MIN_REACHABLE_TOKEN_BYTES} ` +
        "bytes of a random value (128 bits as hex digits: `openssl rand -hex 16` or longer)",
    );
  }
}
