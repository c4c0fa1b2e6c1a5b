/**
 * Tensor and sequence parallelism (PyTorch's `torch.distributed.tensor.parallel`).
 * @module
 */

export * from "./functional.ts";
export * from "./gpt_plan.ts";
export * from "./loss.ts";
export * from "./parallelize.ts";
export { outputPlacement } from "./_params.ts";
export {
  type ParamPlacement,
  type Placement,
  Replicate,
  Shard,
  tensorParallelPlacement,
} from "./placement.ts";
export * from "./style.ts";
export * from "./style_sequence.ts";
