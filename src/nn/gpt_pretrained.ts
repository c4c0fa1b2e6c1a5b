/**
 * Reading a Hugging Face GPT-2 checkpoint folder (`config.json`, `model.safetensors`) into
 * `nn.GPT`, as nanoGPT's `GPT.from_pretrained` maps `GPT2LMHeadModel`'s state dict onto its own.
 * @module
 */

import { join } from "node:path";
import { CheckpointError } from "../safetensors/errors.ts";
import { load, readHeader, type SafetensorsHeader } from "../safetensors/safetensors.ts";
import { printable, quote } from "../io/printable.ts";
import { notRegularFile } from "../io/regular_file.ts";
import { noGrad } from "../tensor/autograd.ts";
import { type DType, isFloat } from "../tensor/dtype.ts";
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
 * 0 (or the override), as nanoGPT's `from_pretrained` forces them. The sizes are checked against
 * the shapes in `dir/model.safetensors`'s header (its data unread) before anything is allocated,
 * so that a config.json that disagrees with its weights (`n_layer: 1e9` beside two layers) is
 * refused naming the key, instead of building a model the machine cannot hold.
 *
 * @throws RangeError for an override other than `dropout`.
 * @throws CheckpointError naming config.json and the key that is missing, unsupported or
 *   disagrees with the weights, or model.safetensors and the tensor that is missing, unexpected,
 *   misshapen or not floating-point; either path when it is missing or not a regular file.
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
  const text = readFile(path, "a GPT-2 folder has config.json");
  // Each number's text as written: JSON reads 1e400 as Infinity, which JSON.stringify calls null.
  const written = new Map<string, string>();
  let json: Record<string, unknown> = {};
  try {
    json = JSON.parse(text, (key, value, context?: { source?: string }) => {
      if (typeof value === "number" && context?.source) written.set(key, context.source);
      return value;
    });
  } catch (error) {
    fail(`not valid JSON: ${printable((error as Error).message)}`);
  }
  if (json === null || typeof json !== "object" || Array.isArray(json)) fail("not a JSON object");
  if (json.tie_word_embeddings === false) {
    fail("tie_word_embeddings is false; nanoGPT's GPT ties lm_head to wte");
  }
  const sizes: Record<string, number> = {};
  for (const [key, name] of Object.entries(CONFIG_KEYS)) {
    const value = Object.hasOwn(json, key) ? json[key] : undefined;
    if (!Number.isSafeInteger(value) || (value as number) <= 0) {
      const seen = typeof value === "number"
        ? printable(written.get(key) ?? `${value}`)
        : quote(value);
      fail(`${key} is ${seen}, expected a positive integer`);
    }
    sizes[name] = value as number;
  }
  const { nLayer, nHead, nEmbd, vocabSize, blockSize } = sizes;
  if (nEmbd % nHead !== 0) fail(`n_embd ${nEmbd} is not divisible by n_head ${nHead}`);
  const dropout = overrides.dropout ?? 0;
  const config = { nLayer, nHead, nEmbd, vocabSize, blockSize, bias: true, dropout };
  checkWeights(dir, config);
  return config;
}

/** The text of `path`, a regular file (`needed` says why it should be there when missing). */
function readFile(path: string, needed: string): string {
  const fail = (problem: string, cause?: unknown): never => {
    throw new CheckpointError(path, problem, { cause });
  };
  try {
    const other = notRegularFile(path);
    if (other !== null) fail(`is ${other}, expected a file (${needed})`);
    return Deno.readTextFileSync(path);
  } catch (error) {
    if (error instanceof CheckpointError) throw error;
    if (error instanceof Deno.errors.NotFound) fail(`not found (${needed})`, error);
    return fail(`cannot read it: ${(error as Error).message}`, error);
  }
}

/**
 * Compares config.json's sizes with model.safetensors's header: the embeddings' shapes and the
 * number of blocks name the config key they disagree with; every other tensor is checked as
 * loading will check it.
 */
function checkWeights(dir: string, config: GPTConfig): void {
  const path = join(dir, "model.safetensors");
  let tensors: SafetensorsHeader["tensors"] = {};
  try {
    tensors = readHeader(path).tensors;
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) throw error;
    throw new CheckpointError(
      path,
      "not found (a GPT-2 folder has model.safetensors; convert a pytorch_model.bin first)",
    );
  }
  const byName = new Map(Object.entries(tensors).map(([k, t]) => [modelName(k), t]));
  const disagree = (key: string, value: number, what: string): never => {
    throw new CheckpointError(
      join(dir, "config.json"),
      `${key} is ${value}, but model.safetensors has ${what}; the two files disagree`,
    );
  };
  const { nLayer, nEmbd, vocabSize, blockSize } = config;
  for (
    const [name, key, length] of [
      ["wte", "vocab_size", vocabSize],
      ["wpe", "n_positions", blockSize],
    ] as const
  ) {
    const shape = byName.get(`transformer.${name}.weight`)?.shape;
    if (shape === undefined || shape.length !== 2) continue; // named with the other tensors
    const what = `${name}.weight ${formatShape(shape)} ([${key}, n_embd])`;
    if (shape[1] !== nEmbd) disagree("n_embd", nEmbd, what);
    if (shape[0] !== length) disagree(key, length, what);
  }
  const blocks = new Set<number>();
  for (const name of byName.keys()) {
    const block = /^transformer\.h\.(\d+)\./.exec(name)?.[1];
    if (block !== undefined) blocks.add(Number(block));
  }
  if (blocks.size !== nLayer) {
    const last = [...blocks].reduce((a, b) => Math.max(a, b), -1);
    disagree("n_layer", nLayer, `tensors of ${blocks.size} blocks (h.0 to h.${last})`);
  }
  matchTensors(path, tensors, stateShapes(config));
}

/** The parameters of a GPT of `config` (biases on) by state-dict name, PyTorch's [out, in]. */
function stateShapes({ nLayer, nEmbd: c, vocabSize, blockSize }: GPTConfig): ShapeOf {
  const shapes: ShapeOf = {
    "transformer.wte.weight": [vocabSize, c],
    "transformer.wpe.weight": [blockSize, c],
  };
  for (let i = 0; i < nLayer; i++) {
    const linear = (name: string, out: number, inputs: number) => {
      shapes[`transformer.h.${i}.${name}.weight`] = [out, inputs];
      shapes[`transformer.h.${i}.${name}.bias`] = [out];
    };
    shapes[`transformer.h.${i}.ln_1.weight`] = shapes[`transformer.h.${i}.ln_1.bias`] = [c];
    linear("attn.c_attn", 3 * c, c);
    linear("attn.c_proj", c, c);
    shapes[`transformer.h.${i}.ln_2.weight`] = shapes[`transformer.h.${i}.ln_2.bias`] = [c];
    linear("mlp.c_fc", 4 * c, c);
    linear("mlp.c_proj", c, 4 * c);
  }
  shapes["transformer.ln_f.weight"] = shapes["transformer.ln_f.bias"] = [c];
  shapes["lm_head.weight"] = [vocabSize, c];
  return shapes;
}

/** Tensor shapes by name. */
type ShapeOf = Record<string, readonly number[]>;

/** A file's name for a model parameter: `transformer.` before all but `lm_head`. */
function modelName(fileName: string): string {
  if (fileName.startsWith("transformer.") || fileName === "lm_head.weight") return fileName;
  return `transformer.${fileName}`;
}

/** One tensor of the file to copy into the model. */
interface Match {
  fileName: string;
  /** The model's name for it. */
  name: string;
  /** A Conv1D weight, stored [in, out]. */
  transposed: boolean;
}

/**
 * Matches the file's tensors (from its header, or loaded) with the model's parameters `params`:
 * the attention masks and the tied `lm_head` skipped, every other tensor floating-point, with a
 * counterpart of its shape (a Conv1D weight transposed), and none of the model's missing.
 *
 * @throws CheckpointError naming `path` and the tensor missing, unexpected, misshapen or not
 *   floating-point.
 */
function matchTensors(
  path: string,
  tensors: Record<string, { dtype: DType; shape: readonly number[] }>,
  params: ShapeOf,
): Match[] {
  const fail = (problem: string): never => {
    throw new CheckpointError(path, problem);
  };
  const wanted = new Set(Object.keys(params).filter((k) => k !== "lm_head.weight"));
  const matches: Match[] = [];
  for (const [fileName, t] of Object.entries(tensors)) {
    if (fileName.endsWith(".attn.masked_bias") || fileName.endsWith(".attn.bias")) continue;
    const name = modelName(fileName);
    const target = Object.hasOwn(params, name) ? params[name] : undefined;
    const what = `tensor ${quote(fileName)}`;
    if (target === undefined) fail(`${what} has no counterpart ${printable(name)} in the model`);
    if (!isFloat(t.dtype)) {
      fail(`${what} is ${t.dtype.toUpperCase()}, expected F32, BF16 or F16`);
    }
    const transposed = TRANSPOSED.some((suffix) => name.endsWith(suffix));
    const expected = transposed ? [...target!].reverse() : target!;
    if (`${t.shape}` !== `${expected}`) {
      const how = transposed ? ` (Conv1D [in, out], for ${name} ${formatShape(target!)})` : "";
      fail(`${what} has shape ${formatShape(t.shape)}, expected ${formatShape(expected)}${how}`);
    }
    // The tied head is wte's tensor: the file's copy, if any, is the same numbers.
    if (name === "lm_head.weight") continue;
    wanted.delete(name);
    matches.push({ fileName, name, transposed });
  }
  if (wanted.size > 0) {
    const missing = [...wanted].map((k) => k.replace(/^transformer\./, ""));
    const total = Object.keys(params).length - 1;
    const more = missing.length > 5 ? ", ..." : "";
    fail(`missing ${missing.length} of ${total} tensors: ${missing.slice(0, 5).join(", ")}${more}`);
  }
  return matches;
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
 *   or not floating-point (checked again: the file may have changed since its header was read).
 */
export function loadPretrained(dir: string, model: Module): void {
  const path = join(dir, "model.safetensors");
  let tensors: Record<string, Tensor> = {};
  try {
    tensors = load(path).tensors;
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) throw error;
    throw new CheckpointError(path, "not found (it was there when config.json was checked)");
  }
  try {
    const params = model.stateDict() as Record<string, Tensor>;
    const shapes = Object.fromEntries(Object.entries(params).map(([k, p]) => [k, p.shape]));
    const matches = matchTensors(path, tensors, shapes);
    noGrad(() => {
      for (const { fileName, name, transposed } of matches) {
        const source = tensors[fileName];
        params[name].copy_(transposed ? source.t() : source);
      }
    });
  } finally {
    for (const t of Object.values(tensors)) t.dispose();
  }
}
