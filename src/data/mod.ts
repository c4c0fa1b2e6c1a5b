/**
 * Data loading, with PyTorch's names: datasets (`TensorDataset`, `FashionMNIST`,
 * `SyntheticRegression`), samplers (`SequentialSampler`, `RandomSampler`, `DistributedSampler`)
 * and the `DataLoader` that batches them into contiguous native tensors.
 * @module
 */

export { checkIndex, type Dataset, type Sample, type Sized } from "./dataset.ts";
export { gatherRows, TensorDataset } from "./tensor_dataset.ts";
export { SyntheticRegression, type SyntheticRegressionOptions } from "./synthetic.ts";
export { IDX_IMAGES, IDX_LABELS, type IdxArray, parseIdx, readIdx } from "./idx.ts";
export { FASHION_MNIST_ROOT, FashionMNIST, type FashionMNISTOptions } from "./fashion_mnist.ts";
export {
  RandomSampler,
  type RandomSamplerOptions,
  type Sampler,
  type SamplerState,
  SequentialSampler,
} from "./sampler.ts";
export { DistributedSampler, type DistributedSamplerOptions } from "./distributed_sampler.ts";
export { DataLoader, type DataLoaderOptions } from "./dataloader.ts";
export { FORTUNES_ROOT, TextDataset, type TextDatasetOptions } from "./text.ts";
