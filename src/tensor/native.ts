/**
 * The one place where native statuses become TypeScript errors.
 * @module
 */

import { lib, Status } from "../../ffi/dtrain.ts";

/** An error reported by dtrain's native library (out of memory, unsupported), with its status. */
export class NativeError extends Error {
  /** The native status code (see `Status` in ffi/dtrain.ts). */
  readonly status: number;
  /**
   * @param status The native status code.
   * @param message The native library's message.
   */
  constructor(status: number, message: string) {
    super(message);
    this.name = "NativeError";
    this.status = status;
  }
}

/** A native function refused an argument (status EINVAL): a `RangeError`, with the status. */
export class NativeArgumentError extends RangeError {
  /** Always `Status.EINVAL`. */
  readonly status: number = Status.EINVAL;
  /** @param message The native library's message. */
  constructor(message: string) {
    super(message);
    this.name = "RangeError";
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
 * Throws when `status` is not OK: {@linkcode NativeArgumentError} for a refused argument,
 * {@linkcode NativeError} otherwise.
 *
 * @param status A status returned by a native function.
 */
export function unwrap(status: number): void {
  if (status === Status.OK) return;
  if (status === Status.EINVAL) throw new NativeArgumentError(lastNativeError());
  throw new NativeError(status, lastNativeError());
}
