/**
 * The inputs of blocking_test.ts's worker, shared with the test's hand computation.
 * @module
 */

import type { ReduceOp } from "../../../src/distributed/backend.ts";

/** The ops compared; the index is the input's salt. */
export const BLOCKING_OPS: readonly ReduceOp[] = ["sum", "avg", "max"];

/** Lengths: an odd short one and one of a few pages. */
export const BLOCKING_LENGTHS = [7, 3000] as const;

/**
 * Rank `rank`'s input of `n` elements: multiples of 1/16 in [-3, 3), exact in f32 and bf16 and
 * whose f32 sums over a few ranks are exact, so a hand computation matches any order.
 */
export function blockingInput(rank: number, n: number, salt: number): number[] {
  return Array.from({ length: n }, (_, i) => ((rank * 131 + i * 17 + salt * 7) % 96) / 16 - 3);
}
