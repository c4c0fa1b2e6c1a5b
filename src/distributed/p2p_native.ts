/**
 * A point-to-point op posted on a native backend (Gloo, shared memory): run once, off the
 * JavaScript thread or on it, its failure read from the op itself (ops run beside each other, so
 * the context's last error would not be theirs), then freed.
 * @module
 */

import { CollectiveDType, CollectiveStatus, P2PKind } from "../../ffi/collective_codes.ts";
import type { P2PMessage, PostedP2P } from "./backend.ts";
import { DistError, STATUS_CODES } from "./errors.ts";

/** The native functions of a backend's ops. */
export interface NativeP2P {
  /** Runs the op on a worker thread. */
  run(op: Deno.PointerValue): Promise<number>;
  /** Runs the op on the calling thread. */
  runBlocking(op: Deno.PointerValue): number;
  /** Blocks until the op's run on another thread returned; returns its status. */
  wait(op: Deno.PointerValue): number;
  /** Copies the op's error message into `buf`; returns its length. */
  error(op: Deno.PointerValue, buf: Uint8Array<ArrayBuffer>, len: number): number;
  /** Frees the op. */
  free(op: Deno.PointerValue): number;
}

/**
 * Wraps the native op a post returned.
 *
 * @param lib The backend's op functions.
 * @param op The posted op.
 * @returns The posted message; its run frees the op.
 */
export function nativePosted(lib: NativeP2P, op: Deno.PointerValue): PostedP2P {
  let ran = false;
  const once = () => {
    if (ran) throw new DistError("internal", "a point-to-point op ran twice");
    ran = true;
  };
  const failure = (status: number) => {
    if (status === CollectiveStatus.OK) return null;
    const buf = new Uint8Array(1024);
    const len = lib.error(op, buf, buf.length);
    const message = new TextDecoder().decode(buf.subarray(0, Math.min(len, buf.length - 1)));
    return new DistError(STATUS_CODES[status] ?? "internal", message || `p2p status ${status}`);
  };
  const settle = (status: number) => {
    const err = failure(status);
    lib.free(op);
    if (err !== null) throw err;
  };
  return {
    async run() {
      once();
      settle(await lib.run(op));
    },
    runBlocking() {
      once();
      settle(lib.runBlocking(op));
    },
    start() {
      once();
      // Freed once both the run's promise settled and the wait read the outcome.
      let holders = 2;
      const release = () => --holders === 0 && lib.free(op);
      lib.run(op).finally(release);
      return () => {
        const err = failure(lib.wait(op));
        release();
        if (err !== null) throw err;
      };
    },
  };
}

/** The arguments of a native post after the context: kind, peer, buffer, count, dtype, tag, dims, ndim, out. */
export type PostArgs = [
  number,
  number,
  Deno.PointerValue,
  number,
  number,
  number,
  BigInt64Array<ArrayBuffer>,
  number,
  BigUint64Array<ArrayBuffer>,
];

/**
 * Posts `message` through a backend's native post function.
 *
 * @param message The checked message.
 * @param post The native post, bound to its context.
 * @param failure The context's error for a failed post.
 * @returns The native op.
 */
export function postP2PWith(
  message: P2PMessage,
  post: (args: PostArgs) => number,
  failure: (status: number) => DistError,
): Deno.PointerValue {
  const { kind, peer, buf, tag, shape } = message;
  const dims = new BigInt64Array(shape.map(BigInt));
  const out = new BigUint64Array(1);
  const status = post([
    P2PKind[kind],
    peer,
    buf.ptr,
    buf.count,
    CollectiveDType[buf.dtype],
    tag,
    dims,
    dims.length,
    out,
  ]);
  if (status !== CollectiveStatus.OK) throw failure(status);
  return Deno.UnsafePointer.create(out[0]);
}

/** The suffixes of a library's point-to-point functions (`dt_gloo_p2p_run`, `dt_shm_p2p_run`, ...). */
type Verb = "post" | "run" | "run_blocking" | "wait" | "error" | "free";

/** A library with the point-to-point functions of `prefix` (ffi/gloo.ts, ffi/shm.ts). */
// deno-lint-ignore no-explicit-any
export type P2PLibrary<P extends string> = Record<`${P}_p2p_${Verb}`, (...args: any[]) => any>;

/**
 * Posts `message` on the context `ctx` of a native backend whose functions are named `prefix`.
 *
 * @param lib The library.
 * @param prefix `dt_gloo` or `dt_shm`.
 * @param ctx The live context.
 * @param message The checked message.
 * @param failure The context's error for a failed post.
 * @returns The posted message.
 */
export function postNative<P extends string>(
  lib: P2PLibrary<P>,
  prefix: P,
  ctx: Deno.PointerValue,
  message: P2PMessage,
  failure: (status: number) => DistError,
): PostedP2P {
  const fn = (verb: Verb) => lib[`${prefix}_p2p_${verb}` as `${P}_p2p_${Verb}`];
  const op = postP2PWith(message, (args) => fn("post")(ctx, ...args), failure);
  return nativePosted({
    run: (p) => fn("run")(p),
    runBlocking: (p) => fn("run_blocking")(p),
    wait: (p) => fn("wait")(p),
    error: (p, buf, len) => fn("error")(p, buf, len),
    free: (p) => fn("free")(p),
  }, op);
}
