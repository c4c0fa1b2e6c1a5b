/**
 * `SyntheticRegression`: the original project's default data, uniform random inputs and targets,
 * drawn once from an explicit seed so that every process and every run sees the same samples.
 * @module
 */

import { keep } from "../tensor/scope.ts";
import { Tensor } from "../tensor/tensor.ts";
import { checkSeed } from "./_random.ts";
import { TensorDataset } from "./tensor_dataset.ts";

/** Options of {@linkcode SyntheticRegression}. */
export interface SyntheticRegressionOptions {
  /** The number of samples. Default 2048. */
  size?: number;
  /** Features per input. Default 20. */
  inputs?: number;
  /** Values per target. Default 1. */
  outputs?: number;
  /** Seed of the draw (independent of the global generator). Default 0. */
  seed?: number;
}

/**
 * `size` samples of `[x f32 [inputs], y f32 [outputs]]`, every value uniform in [0, 1): the data
 * of the original PyTorch project (`torch.rand(20)`, `torch.rand(1)` per sample), in
 * distribution, not value for value. The values come from the native counter-based generator with
 * the given seed (inputs first, then targets), leaving the global generator untouched.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { SyntheticRegression } from "./mod.ts";
 * const data = new SyntheticRegression({ size: 64, seed: 7 });
 * const [x, y] = data.getBatch(Int32Array.of(0, 1, 2));
 * assert.deepEqual(x.shape, [3, 20]);
 * assert.deepEqual(y.shape, [3, 1]);
 * data.dispose();
 * ```
 */
export class SyntheticRegression extends TensorDataset {
  /** The seed the samples were drawn from. */
  readonly seed: number;

  /**
   * Creates a `SyntheticRegression`.
   *
   * @param options size, inputs, outputs and seed.
   */
  constructor(options: SyntheticRegressionOptions = {}) {
    const { size = 2048, inputs = 20, outputs = 1, seed = 0 } = options;
    for (const [name, value] of Object.entries({ size, inputs, outputs })) {
      if (!Number.isSafeInteger(value) || value < 0) {
        throw new RangeError(`SyntheticRegression: ${name} ${value} is not a non-negative integer`);
      }
    }
    checkSeed("SyntheticRegression", seed);
    super(uniform([size, inputs], seed, 0), uniform([size, outputs], seed, size * inputs));
    this.seed = seed;
  }

  /** Frees the samples' native memory; the dataset cannot be read afterwards. */
  dispose(): void {
    for (const t of this.tensors) t.dispose();
  }

  /** `using data = new SyntheticRegression()` frees the samples at the end of the block. */
  [Symbol.dispose](): void {
    this.dispose();
  }
}

/** U[0, 1) values for counters offset.. of the generator seeded with `seed`. */
function uniform(shape: number[], seed: number, offset: number): Tensor {
  const t = keep(Tensor.empty(shape, "f32"));
  const dev = t.storage.backend;
  dev.check(dev.kernels.randUniform(t.ptr, t.numel(), 0, 1, seed, offset));
  return t;
}
