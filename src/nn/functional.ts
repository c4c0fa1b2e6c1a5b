/**
 * `F`: the functional forms of the layers (PyTorch's `torch.nn.functional`).
 * @module
 */

export { gelu, relu } from "../tensor/ops/elementwise.ts";
export { linear } from "../tensor/ops/matmul.ts";
export {
  crossEntropy,
  type CrossEntropyOptions,
  dropout,
  embedding,
  layerNorm,
  logSoftmax,
  mseLoss,
  softmax,
} from "../tensor/ops/nn.ts";
