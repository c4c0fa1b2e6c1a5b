/**
 * dtrain: train neural networks on one or many machines, from Deno.
 *
 * Tensors with autograd run their arithmetic in a native library (OpenBLAS for matrix products)
 * loaded with `Deno.dlopen`; `nn`, `optim` and `data` follow PyTorch's names and semantics.
 *
 * @example Train a step
 * ```ts
 * import assert from "node:assert/strict";
 * import { F, nn, optim, tensor } from "./mod.ts";
 * const model = new nn.Sequential(new nn.Linear(4, 8), new nn.ReLU(), new nn.Linear(8, 3));
 * const opt = new optim.AdamW(model.parameters(), { lr: 1e-3, weightDecay: 0.01 });
 * const x = tensor([[0.1, 0.2, 0.3, 0.4]]);
 * const y = tensor([2], [1], { dtype: "i32" });
 * const loss = F.crossEntropy(model.forward(x), y);
 * loss.backward();
 * opt.step();
 * opt.zeroGrad();
 * const after = F.crossEntropy(model.forward(x), y);
 * assert.ok(after.item() < loss.item());
 * ```
 *
 * Tensors live on a device found by name (`"cpu"` is built in; `registerDevice` adds one), and
 * `t.to(device)` moves them (`"cuda"` where a GPU is: `cuda.isAvailable()` says, or why not;
 * `"emu"`, an emulated accelerator with a GPU's contract over the CPU kernels, everywhere); see
 * [Note: device seam] in src/tensor/device/device.ts.
 * @module
 */

export { type DType, type GradHook, Tensor, type TensorOptions } from "./src/tensor/tensor.ts";
export type { HalfDType } from "./src/tensor/dtype.ts";
export type { TensorMath } from "./src/tensor/tensor_math.ts";
export type { TensorIndexing } from "./src/tensor/tensor_indexing.ts";
export type { TensorHost } from "./src/tensor/tensor_host.ts";
export type { TensorShape } from "./src/tensor/tensor_shape.ts";
export { allocatedBytes, type Claim, type Device, type Storage } from "./src/tensor/storage.ts";
export { type Bf16MatmulBackend, bf16MatmulBackend } from "./src/tensor/device/bf16_gemm.ts";
export {
  type CamelCase,
  canonicalDeviceName,
  cuda,
  type DeviceBackend,
  type DeviceBlock,
  type DeviceFactory,
  type DevicePtr,
  emu,
  FAMILIES,
  type FamilyName,
  type FamilyRecord,
  getDevice,
  type HostCopy,
  type KernelAbi,
  type KernelFunction,
  type KernelName,
  type KernelOf,
  type Kernels,
  type KernelSymbol,
  type KernelSymbolOf,
  kernelSymbols,
  registerDevice,
  RUNTIME_SYMBOLS,
  type SeamName,
} from "./src/tensor/device/mod.ts";
export {
  arange,
  full,
  type NestedArray,
  ones,
  rand,
  randint,
  randn,
  tensor,
  type TensorData,
  zeros,
  zerosLike,
} from "./src/tensor/creation.ts";
export { chunk, narrow, select, split } from "./src/tensor/ops/slice.ts";
export { cat, gather, indexSelect, maskedFill, stack, where } from "./src/tensor/ops/indexing.ts";
export { permute, squeeze, tril, triu, unsqueeze } from "./src/tensor/ops/views.ts";
export { eq, ge, gt, le, lt, ne } from "./src/tensor/ops/compare.ts";
export { getRngState, manualSeed, setRngState } from "./src/tensor/random.ts";
export { getNumThreads, setNumThreads } from "./src/tensor/threads.ts";
export { type BackwardOptions, isGradEnabled, type Node, noGrad } from "./src/tensor/autograd.ts";
export { keep, type Scoped, tidy, tidyAsync } from "./src/tensor/scope.ts";
export {
  autocast,
  autocastAsync,
  type AutocastDeviceType,
  type AutocastDtype,
  type AutocastOptions,
  getAutocastDtype,
  isAutocastEnabled,
} from "./src/tensor/autocast.ts";
export { NativeArgumentError, NativeError } from "./src/tensor/native.ts";
export {
  abs,
  clamp,
  max,
  maximum,
  min,
  minimum,
  type ValuesIndices,
} from "./src/tensor/ops/order.ts";
export { argmax, mean, std, sum, variance, type VarianceOptions } from "./src/tensor/ops/reduce.ts";
export { matmul } from "./src/tensor/ops/matmul.ts";
export { logSoftmax, softmax } from "./src/tensor/ops/nn.ts";
export * as nn from "./src/nn/mod.ts";
export { F } from "./src/nn/functional_namespace.ts";
export type {
  BCEWithLogitsOptions,
  CrossEntropyOptions,
  MSELossOptions,
  Reduction,
} from "./src/nn/loss.ts";
export type { AttentionOptions } from "./src/tensor/ops/attention.ts";
export * as optim from "./src/optim/mod.ts";
export * as data from "./src/data/mod.ts";
export * as checkpoint from "./src/checkpoint/mod.ts";
export * as dist from "./src/distributed/mod.ts";
export * as parallel from "./src/parallel/mod.ts";
export * as profile from "./src/profile/mod.ts";
