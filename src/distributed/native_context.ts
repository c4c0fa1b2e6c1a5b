/**
 * What the three native backends (Gloo, shared memory, NCCL) share in calling their libraries:
 * the context pointer and its lifetime, the status check after every call with the message the
 * library kept, and the pinning that keeps a nonblocking call's arguments alive. Each backend
 * then writes only its calls' arguments.
 * @module
 */

import { CollectiveStatus } from "../../ffi/collective_codes.ts";
import { DistError, STATUS_CODES } from "./errors.ts";

/** A library's `dt_<name>_last_error(ctx, buf, len)`: copies the context's last failure. */
export type ReadLastError = (
  ctx: Deno.PointerValue,
  buf: Uint8Array<ArrayBuffer>,
  len: number,
) => number;

const decoder = new TextDecoder();

/**
 * The DistError for a failed call: the code its status means, the message the library kept.
 *
 * @param name The backend's name, for a status that came without a message.
 * @param read The library's last-error call.
 * @param ctx The context (null: the last failed creation's).
 * @param status The call's status (`CollectiveStatus`).
 * @returns The error.
 */
export function nativeError(
  name: string,
  read: ReadLastError,
  ctx: Deno.PointerValue,
  status: number,
): DistError {
  const buf = new Uint8Array(2048);
  const len = read(ctx, buf, buf.length);
  const message = decoder.decode(buf.subarray(0, Math.min(len, buf.length - 1)));
  return new DistError(STATUS_CODES[status] ?? "internal", message || `${name} status ${status}`);
}

/**
 * Keeps `refs` reachable until `call` settles: a nonblocking FFI call reads its arguments on
 * another thread after JavaScript has moved on, and the garbage collector does not know that.
 *
 * @param call The nonblocking call.
 * @param refs What it reads.
 * @returns `call`.
 */
export function pinned<T>(call: Promise<T>, refs: unknown[]): Promise<T> {
  return call.finally(() => refs.length);
}

/** Frees contexts whose backend was dropped without close(); a backstop only. */
const leaked = new FinalizationRegistry<
  { free: (ctx: Deno.PointerValue) => void; ctx: Deno.PointerValue }
>(
  ({ free, ctx }) => free(ctx),
);

/** How a backend's library is called on its context. */
export interface NativeCalls {
  /** The backend's name, in errors ("gloo backend is closed"). */
  name: string;
  /** The library's last-error call. */
  lastError: ReadLastError;
  /** Frees the context. */
  free: (ctx: Deno.PointerValue) => void;
  /**
   * A call every collective makes first, status-checked (NCCL's: order it after the compute
   * queued on the GPU so far).
   */
  before?: (ctx: Deno.PointerValue) => number;
}

/** A native backend's context: live until closed, every call's status checked. */
export class NativeContext {
  #ctx: Deno.PointerValue;
  #calls: NativeCalls;

  /**
   * Takes ownership of `ctx`, freed by `close` (or, as a backstop, once `owner` is collected).
   *
   * @param owner The backend holding the context.
   * @param ctx The connected context.
   * @param calls How its library is called.
   */
  constructor(owner: object, ctx: Deno.PointerValue, calls: NativeCalls) {
    this.#ctx = ctx;
    this.#calls = calls;
    leaked.register(owner, { free: calls.free, ctx }, this);
  }

  /** The context, prepared for a collective; DistError "broken" once closed. */
  get live(): Deno.PointerValue {
    const ctx = this.#ctx;
    if (ctx === null) throw new DistError("broken", `${this.#calls.name} backend is closed`);
    const before = this.#calls.before;
    if (before !== undefined) this.check(before(ctx));
    return ctx;
  }

  /** Whether `close` was called. */
  get closed(): boolean {
    return this.#ctx === null;
  }

  /** The error of a failed call on this context, with the library's message. */
  error(status: number): DistError {
    return nativeError(this.#calls.name, this.#calls.lastError, this.#ctx, status);
  }

  /** Throws the error of `status` unless it is OK. */
  check(status: number): void {
    if (status !== CollectiveStatus.OK) throw this.error(status);
  }

  /** Awaits a nonblocking call, keeping `refs` alive meanwhile, and checks its status. */
  async checked(call: Promise<number>, refs: unknown[] = []): Promise<void> {
    this.check(await pinned(call, refs));
  }

  /** Runs a blocking call on the live context and checks its status. */
  now(call: (ctx: Deno.PointerValue) => number): void {
    this.check(call(this.live));
  }

  /** Runs a nonblocking call on the live context and checks its status. */
  async run(
    call: (ctx: Deno.PointerValue) => Promise<number>,
    refs: unknown[] = [],
  ): Promise<void> {
    await this.checked(call(this.live), refs);
  }

  /** Frees the context; idempotent. No call may be in flight. */
  close(): void {
    if (this.#ctx === null) return;
    leaked.unregister(this);
    this.#calls.free(this.#ctx);
    this.#ctx = null;
  }
}
