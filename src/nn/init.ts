/** Parameter initialisation, PyTorch's `nn.init` subset that the built-in layers use. @module */

import { rand, randn } from "../tensor/creation.ts";
import type { Tensor } from "../tensor/tensor.ts";

/** A tensor of `shape` drawn from U(-bound, bound). */
export function uniform(shape: readonly number[], bound: number): Tensor {
  return rand(shape, { low: -bound, high: bound });
}

/** A tensor of `shape` drawn from N(mean, std²). */
export function normal(shape: readonly number[], mean = 0, std = 1): Tensor {
  return randn(shape, { mean, std });
}

/**
 * PyTorch's default `nn.Linear` weight init, `kaiming_uniform_(a=sqrt(5))`: U(-b, b) with
 * b = gain * sqrt(3 / fanIn) = 1 / sqrt(fanIn).
 */
export function kaimingUniformLinear(shape: readonly number[]): Tensor {
  const fanIn = shape[1];
  return uniform(shape, fanIn > 0 ? 1 / Math.sqrt(fanIn) : 0);
}
