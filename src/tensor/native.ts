/**
 * The one place where native statuses become TypeScript errors.
 * @module
 */

import { lib, Status } from "../../ffi/dtrain.ts";

/** An error reported by dtrain's native library, with its status code. */
export class NativeError extends Error {
  /** The native status code (see `Status` in ffi/dtrain.ts). */
  readonly status: number;
  /**
   * @param status The native status code.
   * @param message The native library's message.
   */
  constructor(status: number, message: string) {
    super(message);
    this.name = status === Status.EINVAL ? "RangeError" : "NativeError";
    this.status = status;
  }
}

const messageBuffer = new Uint8Array(512);

/** The calling thread's last native error message. */
export function lastNativeError(): string {
  const length = lib.dt_last_error(messageBuffer, messageBuffer.length);
  return new TextDecoder().decode(
    messageBuffer.subarray(0, Math.min(length, messageBuffer.length - 1)),
  );
}

/**
 * Throws a {@linkcode NativeError} when `status` is not OK.
 *
 * @param status A status returned by a native function.
 */
export function unwrap(status: number): void {
  if (status !== Status.OK) throw new NativeError(status, lastNativeError());
}
