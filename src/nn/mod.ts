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
  Identity,
  LayerNorm,
  Linear,
  type LinearOptions,
  ReLU,
  RMSNorm,
  SiLU,
} from "./layers.ts";
export { MLP, type MLPOptions, ModuleDict, ModuleList, Sequential } from "./container.ts";
export {
  Block,
  CausalSelfAttention,
  type GenerateOptions,
  GPT,
  type GPTConfig,
  GPTTransformer,
  MLPBlock,
} from "./gpt.ts";
export * as init from "./init.ts";
export * as utils from "./utils/mod.ts";
