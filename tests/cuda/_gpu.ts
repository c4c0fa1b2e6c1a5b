/**
 * Whether the CUDA tests can run here, decided once: they need a GPU, its driver and
 * build/libdtrain_cuda.so. Each GPU test is declared with {@linkcode gpuTest}, which marks it
 * ignored where they are missing and puts the reason in its name, so a skipped test says why.
 * @module
 */

import { cuda } from "../../mod.ts";

/** True when a GPU is usable. */
export const hasGpu: boolean = cuda.isAvailable();

/** Why the GPU tests are skipped ("" when they run). */
export const noGpuReason: string = cuda.unavailableReason();

/** The reason, short enough for a test name (its first clause). */
const shortReason = noGpuReason.split(/[:(]/)[0].trim();

/** Declares a test that needs a GPU: ignored, with the reason in its name, where there is none. */
export function gpuTest(name: string, fn: () => void | Promise<void>): void {
  Deno.test({ name: hasGpu ? name : `${name} [skipped: ${shortReason}]`, ignore: !hasGpu, fn });
}

/** The largest relative error of `actual` against `expected` (scaled by the largest |expected|). */
export function relativeError(
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
