/**
 * Writing every byte to a synchronous sink. `writeSync` may write fewer bytes than it is given (to
 * a pipe, a terminal or a file on a full disk), so every caller loops; this is that loop, once.
 * The store's sockets have their own asynchronous `writeAll` (src/dist/store/protocol.ts).
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
 * @example Print a line whatever stdout is
 * ```ts
 * import { writeAll } from "./write_all.ts";
 * writeAll(Deno.stdout, new TextEncoder().encode("hello\n"));
 * ```
 */
export function writeAll(w: SyncWriter, bytes: Uint8Array): void {
  for (let done = 0; done < bytes.length;) done += w.writeSync(bytes.subarray(done));
}
