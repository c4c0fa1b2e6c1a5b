/**
 * Inputs the collective workers feed in, shared with the tests that compute the expected
 * outputs. Values are small integers so that f32 sums and products are exact.
 * @module
 */

import type { ReduceOp } from "../../../src/distributed/backend.ts";

/** allReduce lengths for every op: a single element and sizes that do not divide evenly. */
export const ALL_REDUCE_LENGTHS = [1, 7, 1001];
/** An odd length past Gloo's 1 MiB segment size, run with "sum" and "max" only (to stay fast). */
export const LARGE_LENGTH = 300_001;
/** Ops run at LARGE_LENGTH. */
export const LARGE_OPS: ReduceOp[] = ["sum", "max"];
/** reduceScatter chunk lengths (per rank), deliberately not powers of two. */
export const REDUCE_SCATTER_CHUNKS = [1, 5, 33];
/** Length of each rank's broadcast and allGather tensors. */
export const SMALL_LENGTH = 13;
/**
 * A length whose f32 bytes (264 000) pass the 256 KiB that ride inline on the fingerprint
 * message, so that Gloo's algorithms (and the ring reduce-scatter) move the payload.
 */
export const PAST_INLINE_LENGTH = 66_000;
/** Ops per dtype: avg is f32 only. */
export const OPS: Record<"f32" | "i32", ReduceOp[]> = {
  f32: ["sum", "avg", "min", "max", "prod"],
  i32: ["sum", "min", "max", "prod"],
};

/** Rank `rank`'s input: products stay within ±3^4, everything else within ±5. */
export function input(
  rank: number,
  n: number,
  dtype: "f32" | "i32",
  salt: number,
  op: ReduceOp = "sum",
): Float32Array | Int32Array {
  const out = dtype === "f32" ? new Float32Array(n) : new Int32Array(n);
  for (let i = 0; i < n; i++) {
    out[i] = op === "prod"
      ? ((rank + i) % 2 ? -1 : 1) * (((rank * 5 + i + salt) % 3) + 1)
      : ((rank * 7 + i * 3 + salt) % 11) - 5;
  }
  return out;
}

/** The elementwise reduction over `inputs`, as the collective should compute it. */
export function reduce(
  inputs: (Float32Array | Int32Array)[],
  op: ReduceOp,
  dtype: "f32" | "i32",
): number[] {
  const n = inputs[0].length;
  return Array.from({ length: n }, (_, i) => {
    const xs = inputs.map((x) => x[i]);
    switch (op) {
      case "sum":
        return xs.reduce((a, b) => a + b, 0);
      case "avg":
        return Math.fround(Math.fround(xs.reduce((a, b) => a + b, 0)) / xs.length);
      case "min":
        return Math.min(...xs);
      case "max":
        return Math.max(...xs);
      case "prod":
        return xs.reduce((a, b) => (dtype === "i32" ? Math.imul(a, b) : a * b), 1);
    }
  });
}

/** Key under which workers report a result. */
export function key(...parts: (string | number)[]): string {
  return parts.join("/");
}
