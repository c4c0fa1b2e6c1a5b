/**
 * Data loading, with PyTorch's names: datasets (`TensorDataset`, `FashionMNIST`,
 * `SyntheticRegression`), samplers (`SequentialSampler`, `RandomSampler`, `DistributedSampler`)
 * and the `DataLoader` that batches them into contiguous native tensors.
 * @module
 */

export * from "./dataset.ts";
export * from "./tensor_dataset.ts";
export * from "./synthetic.ts";
export * from "./idx.ts";
export * from "./fashion_mnist.ts";
export * from "./sampler.ts";
export * from "./distributed_sampler.ts";
export * from "./dataloader.ts";
export * from "./text.ts";
