/**
 * Reading a Hugging Face GPT-2 checkpoint folder (`config.json`, `model.safetensors`) into
 * `nn.GPT`, as nanoGPT's `GPT.from_pretrained` maps `GPT2LMHeadModel`'s state dict onto its own.
 * @module
 */

import { join } from "node:path";
import { CheckpointError } from "../checkpoint/errors.ts";
import { load } from "../checkpoint/safetensors.ts";
import { noGrad } from "../tensor/autograd.ts";
import { isFloat } from "../tensor/dtype.ts";
import { formatShape } from "../tensor/layout.ts";
import type { Tensor } from "../tensor/tensor.ts";
import type { GPTConfig, PretrainedOverrides } from "./gpt_blocks.ts";
import type { Module } from "./module.ts";

/** The Conv1D weights, stored [in, out], that nanoGPT transposes into its Linears' [out, in]. */
const TRANSPOSED = [
  "attn.c_attn.weight",
  "attn.c_proj.weight",
  "mlp.c_fc.weight",
  "mlp.c_proj.weight",
];

/** `config.json`'s keys and what they become. */
const CONFIG_KEYS = {
  n_layer: "nLayer",
  n_head: "nHead",
  n_embd: "nEmbd",
  vocab_size: "vocabSize",
  n_positions: "blockSize",
} as const;

/**
 * The model's configuration from `dir/config.json`: the sizes from the file, biases on and dropout
 * 0 (or the override), as nanoGPT's `from_pretrained` forces them.
 *
 * @throws RangeError for an override other than `dropout`.
 * @throws CheckpointError naming config.json and the key that is missing or unsupported.
 */
export function readPretrainedConfig(dir: string, overrides: PretrainedOverrides): GPTConfig {
  const unknown = Object.keys(overrides).filter((k) => k !== "dropout");
  if (unknown.length > 0) {
    throw new RangeError(
      `fromPretrained: only dropout can be overridden (as in nanoGPT), got ${
        unknown.map((k) => JSON.stringify(k)).join(", ")
      }`,
    );
  }
  const path = join(dir, "config.json");
  const fail = (problem: string): never => {
    throw new CheckpointError(path, problem);
  };
  let text = "";
  try {
    text = Deno.readTextFileSync(path);
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) fail("not found (a GPT-2 folder has config.json)");
    throw error;
  }
  let json: Record<string, unknown> = {};
  try {
    json = JSON.parse(text);
  } catch (error) {
    fail(`not valid JSON: ${(error as Error).message}`);
  }
  if (json === null || typeof json !== "object" || Array.isArray(json)) fail("not a JSON object");
  if (json.tie_word_embeddings === false) {
    fail("tie_word_embeddings is false; nanoGPT's GPT ties lm_head to wte");
  }
  const sizes: Record<string, number> = {};
  for (const [key, name] of Object.entries(CONFIG_KEYS)) {
    const value = json[key];
    if (!Number.isInteger(value) || (value as number) <= 0) {
      fail(`${key} is ${JSON.stringify(value)}, expected a positive integer`);
    }
    sizes[name] = value as number;
  }
  const { nLayer, nHead, nEmbd, vocabSize, blockSize } = sizes;
  if (nEmbd % nHead !== 0) fail(`n_embd ${nEmbd} is not divisible by n_head ${nHead}`);
  const dropout = overrides.dropout ?? 0;
  return { nLayer, nHead, nEmbd, vocabSize, blockSize, bias: true, dropout };
}

/** A file's name for a model parameter: `transformer.` before all but `lm_head`. */
function modelName(fileName: string): string {
  if (fileName.startsWith("transformer.") || fileName === "lm_head.weight") return fileName;
  return `transformer.${fileName}`;
}

/**
 * Copies `dir/model.safetensors` into `model` (a freshly built GPT of the file's configuration),
 * transposing the Conv1D weights, skipping the attention mask buffers and the tied `lm_head`.
 *
 * The file's tensors may be F32, BF16 or F16 (the Hub holds GPT-2s saved in each): the
 * parameters stay f32, a BF16 or F16 tensor converted exactly into them (every 2-byte float is an
 * f32), as PyTorch's `load_state_dict` copies into f32 parameters.
 *
 * @throws CheckpointError naming model.safetensors and the tensor missing, unexpected, misshapen
 *   or not floating-point.
 */
export function loadPretrained(dir: string, model: Module): void {
  const path = join(dir, "model.safetensors");
  const fail = (problem: string): never => {
    throw new CheckpointError(path, problem);
  };
  try {
    Deno.statSync(path);
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) {
      fail("not found (a GPT-2 folder has model.safetensors; convert a pytorch_model.bin first)");
    }
    throw error;
  }
  const { tensors } = load(path);
  try {
    const params = model.stateDict();
    const wanted = new Set(Object.keys(params).filter((k) => k !== "lm_head.weight"));
    const copies: [Tensor, Tensor, string][] = [];
    for (const [fileName, t] of Object.entries(tensors)) {
      if (fileName.endsWith(".attn.masked_bias") || fileName.endsWith(".attn.bias")) continue;
      const name = modelName(fileName);
      const target = params[name] as Tensor | undefined;
      const what = `tensor ${JSON.stringify(fileName)}`;
      if (target === undefined) fail(`${what} has no counterpart ${name} in the model`);
      if (!isFloat(t.dtype)) {
        fail(`${what} is ${t.dtype.toUpperCase()}, expected F32, BF16 or F16`);
      }
      const transposed = TRANSPOSED.some((suffix) => name.endsWith(suffix));
      const expected = transposed ? [...target!.shape].reverse() : target!.shape;
      if (`${t.shape}` !== `${expected}`) {
        const how = transposed
          ? ` (Conv1D [in, out], for ${name} ${formatShape(target!.shape)})`
          : "";
        fail(`${what} has shape ${formatShape(t.shape)}, expected ${formatShape(expected)}${how}`);
      }
      // The tied head is wte's tensor: the file's copy, if any, is the same numbers.
      if (name === "lm_head.weight") continue;
      wanted.delete(name);
      copies.push([target!, transposed ? t.t() : t, name]);
    }
    if (wanted.size > 0) {
      const missing = [...wanted].map((k) => k.replace(/^transformer\./, ""));
      const total = Object.keys(params).length - 1;
      const more = missing.length > 5 ? ", ..." : "";
      fail(
        `missing ${missing.length} of ${total} tensors: ${missing.slice(0, 5).join(", ")}${more}`,
      );
    }
    noGrad(() => {
      for (const [target, source] of copies) target.copy_(source);
    });
  } finally {
    for (const t of Object.values(tensors)) t.dispose();
  }
}
