/**
 * Inputs and the hand computation of the bf16/f16 collectives (half_collectives_test.ts): the
 * rounding of one f32 value to each 2-byte type, and reductions folded in rank order with every
 * step rounded, as [Note: half reductions] in csrc/gloo/reduce.cc says the backends compute.
 * @module
 */

import type { ReduceOp } from "../../../src/distributed/backend.ts";

/** The 2-byte floating-point types. */
export type Half = "bf16" | "f16";

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** `x` rounded to f32, then to nearest-even bf16 (PyTorch's bits), as a number. */
export function bf16Round(x: number): number {
  f32[0] = x;
  const u = u32[0];
  if ((u & 0x7fffffff) > 0x7f800000) return NaN;
  u32[0] = (((u + 0x7fff + ((u >>> 16) & 1)) >>> 16) << 16) >>> 0;
  return f32[0];
}

/** `x` rounded to f32, then to `dtype`. */
export function roundTo(dtype: Half, x: number): number {
  const single = Math.fround(x);
  return dtype === "bf16" ? bf16Round(single) : Math.f16round(single);
}

/**
 * Rank `rank`'s input of `n` elements, exact in both types: ±(1 + m/128)·2^e for e in -3..3, so
 * that sums of three or more need rounding. `integers` gives small integers instead, whose sums
 * are exact in any order (for the paths whose order is the ring's, not rank order).
 */
export function halfInput(rank: number, n: number, salt: number, integers = false): number[] {
  return Array.from({ length: n }, (_, i) => {
    const k = rank * 131 + i * 17 + salt * 7;
    if (integers) return (k % 9) - 4;
    const sign = k % 5 === 0 ? -1 : 1;
    return sign * (1 + (k * 37 % 128) / 128) * 2 ** ((k % 7) - 3);
  });
}

/** The reduction of `inputs` (one per rank) folded in rank order, each step rounded to `dtype`. */
export function halfReduce(inputs: number[][], op: ReduceOp, dtype: Half): number[] {
  const step = (a: number, b: number): number => {
    switch (op) {
      case "sum":
      case "avg":
        return roundTo(dtype, a + b);
      case "prod":
        return roundTo(dtype, a * b);
      case "min":
        return b < a ? b : a;
      case "max":
        return a < b ? b : a;
    }
  };
  return inputs[0].map((_, i) => {
    let acc = inputs[0][i];
    for (let r = 1; r < inputs.length; r++) acc = step(acc, inputs[r][i]);
    return op === "avg" ? roundTo(dtype, Math.fround(acc) / inputs.length) : acc;
  });
}

/** The same sum in f32, rounded to `dtype` once at the end: what the backends must not compute. */
export function roundedOnce(inputs: number[][], dtype: Half): number[] {
  return inputs[0].map((_, i) =>
    roundTo(dtype, inputs.reduce((acc, x) => Math.fround(acc + x[i]), 0))
  );
}

/** Ops run on every backend, per length. */
export const HALF_OPS: ReduceOp[] = ["sum", "avg", "max", "prod"];
/** All-reduce lengths: inline on Gloo; LARGE (400 000 bytes) takes Gloo's ring. */
export const HALF_LENGTHS = [1, 7, 1001];
/**
 * Past Gloo's 256 KiB inline payload in 2-byte elements, so Gloo's ring moves it: integers only
 * (see halfInput), "sum" and "avg" only, checked by the worker itself (too long to print).
 */
export const HALF_LARGE = 131_075;
/** Ops run at HALF_LARGE. */
export const HALF_LARGE_OPS: ReduceOp[] = ["sum", "avg"];

/** The first index where `actual` and `expected` differ (as Object.is), or -1. */
export function firstDifference(actual: ArrayLike<number>, expected: ArrayLike<number>): number {
  if (actual.length !== expected.length) return Math.min(actual.length, expected.length);
  for (let i = 0; i < expected.length; i++) if (!Object.is(actual[i], expected[i])) return i;
  return -1;
}
/** Reduce-scatter chunks per rank. */
export const HALF_CHUNKS = [1, 5, 33];
/** Broadcast and all-gather lengths per rank. */
export const HALF_SMALL = 13;
