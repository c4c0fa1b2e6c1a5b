/**
 * The relative error the equivalence tests compare tensors by: ‖got − want‖ / ‖want‖ (L2), per
 * tensor rather than per element, since some elements are float noise around zero.
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
