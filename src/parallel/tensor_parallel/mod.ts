/**
 * Tensor and sequence parallelism (PyTorch's `torch.distributed.tensor.parallel`).
 * @module
 */

export * from "./functional.ts";
export * from "./gpt_plan.ts";
export * from "./loss.ts";
export * from "./parallelize.ts";
export * from "./placement.ts";

import { outputPlacement as recordedOutputPlacement } from "./_params.ts";
import type { Placement } from "./placement.ts";
import type { Tensor } from "../../tensor/tensor.ts";
/**
 * The placement a parallel style gave its output when made with `useLocalOutput: false` (where
 * PyTorch would return a DTensor; dtrain returns the local tensor and records its placement);
 * undefined otherwise.
 *
 * @param t A module's output.
 * @returns Its placement, or undefined.
 */
export function outputPlacement(t: Tensor): Placement | undefined {
  return recordedOutputPlacement(t);
}
export * from "./style.ts";
export * from "./style_sequence.ts";
