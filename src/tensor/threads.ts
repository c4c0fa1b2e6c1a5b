/**
 * The number of threads the native kernels use (PyTorch's `torch.set_num_threads`).
 * @module
 */

import { getCpuThreads, setCpuThreads } from "./device/mod.ts";

/**
 * Sets how many threads the CPU kernels (matrix products, optimizer updates) may use.
 *
 * @param n A positive integer; under the launcher, the cores divided by the local processes.
 */
export function setNumThreads(n: number): void {
  if (!Number.isInteger(n) || n < 1) {
    throw new RangeError(`setNumThreads: expected a positive integer, got ${n}`);
  }
  setCpuThreads(n);
}

/** How many threads the CPU kernels use. */
export function getNumThreads(): number {
  return getCpuThreads();
}
