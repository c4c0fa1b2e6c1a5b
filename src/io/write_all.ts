/**
 * Writing every byte to a synchronous sink. `writeSync` may write fewer bytes than it is given (to
 * a pipe, a terminal or a file on a full disk), so every caller loops; this is that loop, once.
 * The store's sockets have their own asynchronous `writeAll` (src/distributed/store/protocol.ts).
 * @module
 */

/** A sink with a synchronous write that may be short: a `Deno.FsFile`, `Deno.stdout`. */
export interface SyncWriter {
  /** Writes some of `p`; returns how many bytes it wrote. */
  writeSync(p: Uint8Array): number;
}

/**
 * Writes all of `bytes` to `w`, looping over short writes.
 *
 * @param w The sink.
 * @param bytes The bytes to write.
 *
 * @example Every byte reaches a sink that takes at most three per call
 * ```ts
 * import assert from "node:assert/strict";
 * import { writeAll } from "./write_all.ts";
 * const got: number[] = [];
 * const pipe = { // short writes, like a full pipe
 *   writeSync(p: Uint8Array): number {
 *     got.push(...p.subarray(0, 3));
 *     return Math.min(3, p.length);
 *   },
 * };
 * writeAll(pipe, new TextEncoder().encode("hello\n"));
 * assert.equal(new TextDecoder().decode(Uint8Array.from(got)), "hello\n");
 * ```
 */
export function writeAll(w: SyncWriter, bytes: Uint8Array): void {
  for (let done = 0; done < bytes.length;) done += w.writeSync(bytes.subarray(done));
}
