/**
 * What a training configuration's model needs in memory, counted from its sizes before anything is
 * allocated, so that a size the machine cannot hold (`--hidden 1e12`) is refused up front naming
 * the size and the memory, instead of failing out of memory once the processes run. The whole
 * step's peak (activations, logits, gathered shards) is the planner's (plan.ts, plan_memory.ts),
 * which the launching process checks against the memory available before any rank starts.
 * @module
 */

import type { TrainConfig } from "./config.ts";
import { DATASET_SHAPES } from "./model.ts";

/** Bytes of one float32 value. */
const F32 = 4;

/**
 * A GPT's sizes where they are not the flags': `--init-from DIR` builds the model config.json
 * describes (as nanoGPT's `init_from='gpt2*'` overrides n_layer, n_embd, block_size and
 * vocab_size), so the memory it needs is counted from those.
 */
export interface GptSizes {
  /** Transformer blocks (`n_layer`). */
  nLayer: number;
  /** Width (`n_embd`). */
  nEmbd: number;
  /** Positions (`n_positions`). */
  blockSize: number;
  /** Vocabulary (`vocab_size`). */
  vocabSize: number;
  /** How a message names where these sizes come from, e.g. `DIR/config.json's`. */
  source: string;
}

/**
 * The number of parameters of the model `config` names (a GPT's output head shares the token
 * embedding's weight, as in `src/nn/gpt.ts`).
 *
 * @param config A validated configuration.
 * @param gpt The GPT's sizes when they are not the flags' (a pretrained folder's).
 * @returns The count, each weight and bias once.
 *
 * @example
 * ```ts
 * import { equal as assertEquals } from "node:assert/strict";
 * import { DEFAULTS } from "./config.ts";
 * import { parameterCount } from "./footprint.ts";
 * // 784 → 512 → 512 → 10, each layer with its bias.
 * assertEquals(parameterCount(DEFAULTS), 785 * 512 + 513 * 512 + 513 * 10);
 * ```
 */
export function parameterCount(config: TrainConfig, gpt?: GptSizes): number {
  const { inputs, outputs } = DATASET_SHAPES[config.dataset];
  if (config.model === "linear") return (inputs + 1) * outputs;
  if (config.model === "mlp") {
    const sizes = [inputs, ...config.hidden, outputs];
    return sizes.slice(1).reduce((sum, out, i) => sum + (sizes[i] + 1) * out, 0);
  }
  const { nLayer, nEmbd: c, blockSize, vocabSize } = gpt ??
    { ...config, vocabSize: outputs };
  // Per block: two layer norms (2c each), attention (c → 3c, c → c) and the MLP (c → 4c → c).
  const block = 4 * c + (3 * c * c + 3 * c) + (c * c + c) + (4 * c * c + 4 * c) + (4 * c * c + c);
  return (vocabSize + blockSize) * c + nLayer * block + 2 * c;
}

/**
 * Why this machine cannot hold `config`'s model, or null: the values, gradients and optimizer
 * state of every process on this node (each holds all of them under DDP; FSDP shards them over
 * the job's nodes) against the machine's memory. Activations come on top, so this only refuses
 * what cannot fit whatever the batch.
 *
 * @param config A validated configuration.
 * @param totalBytes The machine's memory (default `Deno.systemMemoryInfo().total`; when that
 *   is not permitted, nothing is refused).
 * @param gpt The GPT's sizes when they are not the flags' (a pretrained folder's).
 * @returns The reason, naming the sizes and the memory, or null.
 */
export function exceedsMemory(
  config: TrainConfig,
  totalBytes?: number,
  gpt?: GptSizes,
): string | null {
  const total = totalBytes ?? systemMemory();
  if (total === null) return null;
  const params = parameterCount(config, gpt);
  const states = config.optimizer === "adamw" ? 2 : config.momentum > 0 ? 1 : 0;
  const perProcess = params * F32 * (2 + states);
  const onNode = config.strategy === "fsdp"
    ? perProcess / config.nnodes
    : perProcess * config.nprocPerNode;
  if (onNode <= total) return null;
  const sizes = gpt !== undefined
    ? `${gpt.source} n_layer ${gpt.nLayer}, n_embd ${gpt.nEmbd}, n_positions ${gpt.blockSize} ` +
      `and vocab_size ${gpt.vocabSize}`
    : config.model === "gpt"
    ? `--n-layer ${config.nLayer} --n-embd ${config.nEmbd} --block-size ${config.blockSize}`
    : `--hidden ${config.hidden.join(",")}`;
  const processes = config.strategy === "fsdp"
    ? `sharded over ${config.nnodes} node(s)`
    : `${config.nprocPerNode} process(es) holding the whole model`;
  return `${sizes} gives the ${config.model} ${count(params)} parameters: with their ` +
    `gradients and ${config.optimizer} state about ${bytes(onNode)} on this machine ` +
    `(${processes}), more than its ${bytes(total)} of memory`;
}

function systemMemory(): number | null {
  try {
    return Deno.systemMemoryInfo().total;
  } catch {
    return null; // no --allow-sys: the allocation itself will say
  }
}

function count(n: number): string {
  return n < 1e6 ? String(n) : n.toPrecision(3);
}

/** `n` bytes in the unit a message reads best: `1.50 GiB`. */
export function bytes(n: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) n /= 1024, i++;
  return `${n.toPrecision(3)} ${units[i]}`;
}
