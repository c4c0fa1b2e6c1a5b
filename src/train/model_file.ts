/**
 * A run's `model.safetensors`: the trained model's state dict under nanoGPT's names, a tied
 * tensor stored once (as Hugging Face's `save_model` drops `lm_head.weight`, which loaders tie
 * back to `transformer.wte.weight`), and for a GPT its shape (nanoGPT's `model_args`) and data
 * folder in the metadata, so that `deno task sample --init-from DIR` rebuilds it alone.
 *
 * PyTorch reads it with nanoGPT's model as its `ckpt.pt`:
 * `model = GPT(GPTConfig(**json.loads(meta["model_args"])))`, then
 * `model.load_state_dict(load_file(path), strict=False)` (the only missing key is `lm_head.weight`,
 * which nanoGPT's GPT ties to `transformer.wte.weight`), or `safetensors.torch.load_model(model,
 * path)`, which matches the shared names itself (tests/fixtures/gen_model_file.py checks both).
 * @module
 */

import { resolve } from "node:path";
import { CheckpointError, load, save } from "../checkpoint/mod.ts";
import { GPT, type GPTConfig } from "../nn/gpt.ts";
import type { StateDict } from "../nn/module.ts";
import type { Tensor } from "../tensor/tensor.ts";

/** The output head's name, and the embedding it is tied to (nanoGPT's weight tying). */
const HEAD = "lm_head.weight", EMBEDDING = "transformer.wte.weight";

/** nanoGPT's `model_args`, as its `ckpt.pt` holds them (snake_case). */
interface ModelArgs {
  n_layer: number;
  n_head: number;
  n_embd: number;
  block_size: number;
  bias: boolean;
  vocab_size: number;
  dropout: number;
}

/**
 * What a GPT's tokens are, for decoding its samples: the data folder of a `--dataset tokens` run
 * (its meta.json), or the bytes of UTF-8 text (`--dataset text`).
 */
export type ModelData = { dataDir: string } | { bytes: true };

/** Whether two tensors hold the same shape and bits (a tied pair, even gathered as two copies). */
function sameValues(a: Tensor, b: Tensor): boolean {
  if (a === b) return true;
  if (a.dtype !== b.dtype || `${a.shape}` !== `${b.shape}`) return false;
  const x = a.toArray(), y = b.toArray();
  const bitsX = new Uint8Array(x.buffer, x.byteOffset, x.byteLength);
  const bitsY = new Uint8Array(y.buffer, y.byteOffset, y.byteLength);
  return bitsX.length === bitsY.length && bitsX.every((v, i) => v === bitsY[i]);
}

/**
 * `weights` without `lm_head.weight` when it holds the same numbers as `transformer.wte.weight`
 * (a tied GPT's): what is written, once.
 */
export function withoutTiedHead(weights: StateDict): StateDict {
  const head = weights[HEAD], embedding = weights[EMBEDDING];
  if (head === undefined || embedding === undefined || !sameValues(head, embedding)) return weights;
  const { [HEAD]: _tied, ...rest } = weights;
  return rest;
}

/**
 * Writes `weights` (a tied head once, its alias in the metadata as `save_model` records one) to
 * `path`, with `{format: "pt"}` and, for a GPT, its `model_args` and what its tokens are: the
 * absolute path of its data folder (`data_dir`), or `tokens: "bytes"`.
 *
 * @param path The file, conventionally `DIR/model.safetensors`.
 * @param weights The whole model's state dict.
 * @param gpt The model's shape when it is a GPT.
 * @param data What its tokens are, if known: its data folder (recorded absolute) or UTF-8 bytes.
 */
export function saveModelFile(
  path: string,
  weights: StateDict,
  gpt?: Readonly<GPTConfig>,
  data?: ModelData,
): void {
  const metadata: Record<string, string> = { format: "pt" };
  if (gpt !== undefined) {
    const args: ModelArgs = {
      n_layer: gpt.nLayer,
      n_head: gpt.nHead,
      n_embd: gpt.nEmbd,
      block_size: gpt.blockSize,
      bias: gpt.bias ?? true,
      vocab_size: gpt.vocabSize,
      dropout: gpt.dropout ?? 0,
    };
    metadata.model_args = JSON.stringify(args);
  }
  if (data !== undefined && "dataDir" in data) metadata.data_dir = resolve(data.dataDir);
  if (data !== undefined && "bytes" in data) metadata.tokens = "bytes";
  const stored = withoutTiedHead(weights);
  // safetensors' save_model records each dropped alias so: the name removed, the name kept.
  if (stored !== weights) metadata[HEAD] = EMBEDDING;
  save(path, stored, metadata);
}

/** A GPT read back from a run's model.safetensors, and the data folder it was trained on. */
export interface SavedGPT {
  /** The model, on cpu, in training mode. */
  model: GPT;
  /** The absolute path of its data folder (meta.json decodes its tokens), or null. */
  dataDir: string | null;
  /** Whether its tokens are the bytes of UTF-8 text (a `--dataset text` run's). */
  bytes: boolean;
}

/**
 * Reads a GPT that {@linkcode saveModelFile} wrote: builds it from `model_args` and loads the
 * tensors, `lm_head.weight` tied back to `transformer.wte.weight` when the file has it once.
 *
 * @param path The file.
 * @returns The model, on cpu, in training mode, and its data folder.
 * @throws CheckpointError naming `path` when it has no `model_args` or they or the tensors do
 *   not make a GPT.
 */
export function loadModelFile(path: string): SavedGPT {
  const { tensors, metadata } = load(path);
  try {
    const fail = (problem: string): never => {
      throw new CheckpointError(path, problem);
    };
    if (metadata.model_args === undefined) {
      fail("has no model_args metadata: not a GPT written by dtrain's train job");
    }
    let args: Partial<ModelArgs> = {};
    try {
      args = JSON.parse(metadata.model_args);
    } catch (error) {
      fail(`model_args is not JSON: ${(error as Error).message}`);
    }
    let model: GPT | undefined;
    try {
      model = new GPT({
        nLayer: args.n_layer!,
        nHead: args.n_head!,
        nEmbd: args.n_embd!,
        blockSize: args.block_size!,
        vocabSize: args.vocab_size!,
        bias: args.bias ?? true,
        dropout: args.dropout ?? 0,
      });
    } catch (error) {
      fail(`model_args ${metadata.model_args}: ${(error as Error).message}`);
    }
    const state: Record<string, Tensor> = { ...tensors };
    if (state[HEAD] === undefined && state[EMBEDDING] !== undefined) state[HEAD] = state[EMBEDDING];
    try {
      model!.loadStateDict(state);
    } catch (error) {
      fail(`does not fit model_args ${metadata.model_args}: ${(error as Error).message}`);
    }
    const bytes = metadata.tokens === "bytes";
    return { model: model!, dataDir: metadata.data_dir ?? null, bytes };
  } finally {
    for (const t of Object.values(tensors)) t.dispose();
  }
}
