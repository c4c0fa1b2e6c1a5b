/**
 * The safetensors file format: named tensors and string metadata in one file that PyTorch's
 * `safetensors.torch.save_file` / `load_file` write and read, byte for byte. It stands on tensors
 * and files only, so that `nn` (GPT's `fromPretrained`) reads Hugging Face weights with it and
 * `checkpoint` builds model and optimizer state on it; the public API is `checkpoint`'s.
 * @module
 */

export * from "./safetensors.ts";
export * from "./errors.ts";
