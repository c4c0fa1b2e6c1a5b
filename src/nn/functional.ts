/**
 * `F`: the functional forms of the layers (PyTorch's `torch.nn.functional`).
 * @module
 */

export { gelu, relu } from "../tensor/ops/elementwise.ts";
export { linear } from "../tensor/ops/matmul.ts";
export { type AttentionOptions, scaledDotProductAttention } from "../tensor/ops/attention.ts";
export { dropout, embedding, layerNorm, logSoftmax, softmax } from "../tensor/ops/nn.ts";
export { rmsNorm, silu } from "./composite.ts";
export {
  type BCEWithLogitsOptions,
  binaryCrossEntropyWithLogits,
  crossEntropy,
  type CrossEntropyOptions,
  mseLoss,
  type MSELossOptions,
  type Reduction,
} from "./loss.ts";
