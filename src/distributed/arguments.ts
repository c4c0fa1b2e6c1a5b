/**
 * The checks every collective's arguments pass before anything is sent: what a tensor must be
 * (`TensorLike`), the reduce op, the lengths that must agree, and which memory the tensors of a
 * call live in. They throw DistError "invalid" naming the collective, the argument and the value.
 * @module
 */

import { getDevice } from "../tensor/device/mod.ts";
import type { DType, NativeBuffer, ReduceOp, TensorLike } from "./backend.ts";
import { DTYPE_BYTES, REDUCE_OPS } from "./backend.ts";
import { DistError } from "./errors.ts";
import { addressOf } from "./ownership.ts";

/**
 * A DistError "invalid": a bad argument, caught before anything was sent.
 */
export function invalid(message: string): DistError {
  return new DistError("invalid", message);
}

/**
 * Checks `t` and describes it as a native buffer.
 */
export function bufferOf(what: string, role: string, t: TensorLike): NativeBuffer {
  if (t === null || typeof t !== "object") {
    throw invalid(`${what}: ${role} must be a tensor, got ${t === null ? "null" : typeof t}`);
  }
  if (!Object.hasOwn(DTYPE_BYTES, t.dtype)) {
    throw invalid(
      `${what}: ${role} dtype must be one of ${
        Object.keys(DTYPE_BYTES).join(", ")
      }, got "${t.dtype}"`,
    );
  }
  if (!t.isContiguous()) {
    throw invalid(`${what}: ${role} must be contiguous; call .contiguous() first`);
  }
  const count = typeof t.numel === "function" ? t.numel() : t.numel;
  if (!Number.isSafeInteger(count) || count < 0) {
    throw invalid(`${what}: ${role} has an invalid element count ${count}`);
  }
  const ptr = addressOf(t);
  if (ptr === null && count > 0) throw invalid(`${what}: ${role} has a null data pointer`);
  return { ptr, count, dtype: t.dtype as DType };
}

/**
 * Checks that `op` is a reduce op `dtype` has.
 */
export function checkOp(what: string, op: ReduceOp, dtype: DType): void {
  if (!REDUCE_OPS.includes(op)) {
    throw invalid(`${what}: unknown reduce op "${op}"; use one of ${REDUCE_OPS.join(", ")}`);
  }
  if (op === "avg" && dtype === "i32") {
    throw invalid(`${what}: op "avg" needs floating-point tensors (f32, bf16, f16), got ${dtype}`);
  }
}

/**
 * Checks that `buf` has `ref`'s dtype and `count` elements (`why` says where `count` comes from).
 */
export function checkSameAs(
  what: string,
  role: string,
  buf: NativeBuffer,
  ref: NativeBuffer,
  count: number,
  why: string,
): void {
  if (buf.dtype !== ref.dtype) {
    throw invalid(`${what}: ${role} is ${buf.dtype} but the other tensor is ${ref.dtype}`);
  }
  if (buf.count !== count) {
    throw invalid(`${what}: ${role} has ${buf.count} elements, expected ${count} (${why})`);
  }
}

/**
 * Checks an all-gather's output (one flat tensor, or one per rank) against its input.
 */
export function gatherBuffers(
  what: string,
  size: number,
  out: TensorLike | TensorLike[],
  t: TensorLike,
): { outs: NativeBuffer[]; input: NativeBuffer } {
  const input = bufferOf(what, "input", t);
  const outs = Array.isArray(out)
    ? out.map((o, i) => bufferOf(what, `output ${i}`, o))
    : [bufferOf(what, "output", out)];
  if (Array.isArray(out)) {
    if (outs.length !== size) {
      throw invalid(`${what}: got ${outs.length} outputs for a group of ${size} ranks`);
    }
    outs.forEach((o, i) =>
      checkSameAs(what, `output ${i}`, o, input, input.count, "the input's length")
    );
  } else {
    const why = `input length ${input.count} × group size ${size}`;
    checkSameAs(what, "output", outs[0], input, size * input.count, why);
  }
  return { outs, input };
}

/**
 * Checks a reduce-scatter's buffers: `input` holds `size × out` elements of `out`'s dtype, and
 * `op` is a reduce op of that dtype.
 */
export function scatterBuffers(
  what: string,
  size: number,
  out: TensorLike,
  input: TensorLike,
  op: ReduceOp,
): { o: NativeBuffer; i: NativeBuffer } {
  const o = bufferOf(what, "output", out);
  const i = bufferOf(what, "input", input);
  checkOp(what, op, i.dtype);
  checkSameAs(what, "input", i, o, size * o.count, `output length ${o.count} × group size ${size}`);
  return { o, i };
}

/** Checks `allocShared`'s arguments: a count of elements and a dtype shared memory holds. */
export function checkShared(what: string, count: number, dtype: DType): void {
  if (!Number.isSafeInteger(count) || count < 0) {
    throw invalid(`${what}: count must be a non-negative integer, got ${count}`);
  }
  if (dtype !== "f32" && dtype !== "i32") {
    throw invalid(`${what}: dtype must be "f32" or "i32", got "${dtype}"`);
  }
}

/** The memory `t`'s elements are in: "host", or the family of the device that owns them. */
function memoryOfOne(t: TensorLike): string {
  // No device means host memory (TensorLike says so); the registry would open "cpu" for nothing.
  if (t.device === undefined) return "host";
  try {
    if (getDevice(t.device).isHostMemory) return "host";
  } catch {
    // A device this process cannot open (CUDA absent) holds nothing a host backend could read:
    // its family's communicator (none, or one that says why) decides.
  }
  return t.device.split(":")[0];
}

/**
 * Which memory the tensors of one call are in (null for none: a barrier): "host", or the family
 * of the device whose own memory holds them ("cuda", "emu"; see `Memory` in backends.ts).
 *
 * @throws DistError "invalid" for tensors in two kinds of memory (host and a device's, or two
 *   families'), naming both.
 */
export function memoryOf(what: string, tensors: TensorLike[]): string | null {
  if (tensors.length === 0) return null;
  const memories = tensors.map(memoryOfOne);
  if (memories.every((m) => m === memories[0])) return memories[0];
  const first = memories.findIndex((m) => m !== "host");
  const other = memories.findIndex((m) => m !== memories[first]);
  const device = tensors[first].device;
  if (memories[other] === "host") {
    throw invalid(`${what}: tensors on ${device} and in host memory in one call; move them to one`);
  }
  throw invalid(
    `${what}: tensors on ${device} and on ${tensors[other].device} in one call; move them to ` +
      "one device",
  );
}
