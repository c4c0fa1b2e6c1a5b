/**
 * Data loading, with PyTorch's names: datasets (`TensorDataset`, `FashionMNIST`,
 * `SyntheticRegression`), samplers (`SequentialSampler`, `RandomSampler`, `DistributedSampler`),
 * the `DataLoader` that batches them into contiguous native tensors, language-model token
 * streams: nanoGPT's `.bin` files (`TokenFile`) and llm.c's shards (`DistributedDataLoader`), and
 * the tokenizers of language-model corpora (`gpt2Tokenizer`, `charTokenizer`, `loadMeta`).
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
export * from "./tokenizer.ts";
export * from "./tokenizer_gpt2.ts";
export * from "./token_file.ts";
export * from "./token_shards.ts";
