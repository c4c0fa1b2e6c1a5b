/**
 * `parallel`: data-parallel training (PyTorch's `torch.nn.parallel`).
 * @module
 */

export { type DDPOptions, type DDPStats, DistributedDataParallel } from "./ddp.ts";
export {
  applyMixedPrecision,
  type MixedPrecisionPolicy,
  type PrecisionDtype,
} from "./mixed_precision.ts";
