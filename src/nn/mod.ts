/**
 * `nn`: modules, parameters and initialisation (PyTorch's `torch.nn`).
 * @module
 */

export * from "./parameter.ts";
export * from "./module.ts";
export * from "./layers.ts";
export * from "./container.ts";
export * from "./gpt.ts";
/** Weight initialisation (PyTorch's `torch.nn.init`). */
export * as init from "./init.ts";
/** Helpers around modules and their gradients (PyTorch's `torch.nn.utils`). */
export * as utils from "./utils/mod.ts";
