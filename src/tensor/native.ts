/**
 * The errors native statuses become (each device's `check` throws them; see device/cpu.ts).
 * @module
 */

import { Status } from "./device/device.ts";

/** An error reported by dtrain's native library (out of memory, unsupported), with its status. */
export class NativeError extends Error {
  /** The native status code (see `Status` in ffi/dtrain.ts). */
  readonly status: number;
  /**
   * Creates a `NativeError`.
   *
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
  /**
   * Creates a `NativeArgumentError`.
   *
   * @param message The native library's message.
   */
  constructor(message: string) {
    super(message);
    this.name = "RangeError";
  }
}
