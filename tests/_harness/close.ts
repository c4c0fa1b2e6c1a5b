/**
 * The relative errors the equivalence tests compare tensors by: ‖got − want‖ / ‖want‖ (L2), per
 * tensor rather than per element, since some elements are float noise around zero; and the
 * largest element's error against the largest |want|, which the device tests hold every element
 * of a kernel's output to.
 * @module
 */

import assert from "node:assert/strict";

/**
 * ‖got − want‖ / ‖want‖, with `floor` under the squared norm so that an all-zero `want` divides by
 * a tiny number instead of zero.
 */
export function relativeError(
  got: ArrayLike<number>,
  want: ArrayLike<number>,
  what = "lengths",
  floor = 1e-30,
): number {
  assert.equal(got.length, want.length, what);
  let diff = 0, norm = 0;
  for (let i = 0; i < want.length; i++) {
    diff += (got[i] - want[i]) ** 2;
    norm += want[i] ** 2;
  }
  return Math.sqrt(diff / Math.max(norm, floor));
}

/** The largest error of `actual` against `expected`, relative to the largest |expected|. */
export function maxRelativeError(
  actual: ArrayLike<number>,
  expected: ArrayLike<number>,
): number {
  if (actual.length !== expected.length) {
    throw new RangeError(`lengths differ: ${actual.length} vs ${expected.length}`);
  }
  let scale = 0, worst = 0;
  for (let i = 0; i < expected.length; i++) scale = Math.max(scale, Math.abs(expected[i]));
  for (let i = 0; i < expected.length; i++) {
    worst = Math.max(worst, Math.abs(actual[i] - expected[i]) / (scale || 1));
  }
  return worst;
}
