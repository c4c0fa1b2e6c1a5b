/**
 * `nn`: modules, parameters and initialisation (PyTorch's `torch.nn`).
 * @module
 */

export { Parameter } from "./parameter.ts";
export {
  type IncompatibleKeys,
  type LoadStateDictOptions,
  Module,
  type StateDict,
} from "./module.ts";
export {
  Dropout,
  Embedding,
  Flatten,
  GELU,
  LayerNorm,
  Linear,
  type LinearOptions,
  ReLU,
} from "./layers.ts";
export { MLP, type MLPOptions, Sequential } from "./container.ts";
export * as init from "./init.ts";
