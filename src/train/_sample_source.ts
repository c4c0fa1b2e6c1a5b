/**
 * What `deno task sample --init-from DIR` samples from: the GPT in DIR (a run folder's
 * model.safetensors, or a Hugging Face GPT-2 folder) and the tokenizer that encodes the prompt
 * and decodes the samples (the run's meta.json, or GPT-2's, as nanoGPT's sample.py picks).
 * @module
 */

import { existsSync } from "node:fs";
import { join } from "node:path";
import { CheckpointError } from "../safetensors/errors.ts";
import { GPT } from "../nn/gpt.ts";
import { loadMeta, type Tokenizer } from "../data/tokenizer.ts";
import { gpt2Tokenizer } from "../data/tokenizer_gpt2.ts";
import { TextDataset } from "../data/text.ts";
import { loadModelFile } from "./model_file.ts";

/** What encodes a prompt and decodes samples: a data set's tokenizer, or UTF-8 bytes. */
export type Codec = Pick<Tokenizer, "vocabSize" | "encode" | "decode">;

/** A model to sample from, its tokenizer, and how each was found (for the user). */
export interface SampleSource {
  /** The model, on cpu, in training mode. */
  model: GPT;
  /** Encodes the prompt and decodes the samples. */
  tokenizer: Codec;
  /** Lines saying what was loaded from where. */
  notes: string[];
}

/** GPT-2's vocabulary: a smaller model cannot have been trained on its tokens. */
const GPT2_VOCAB = 50257;

/** The tokens of `--dataset text`: the bytes of UTF-8 text. */
const BYTES: Codec = {
  vocabSize: TextDataset.vocabSize,
  encode: TextDataset.encode,
  decode: TextDataset.decode,
};

/** The GPT in `dir` and what its file says of its tokens. */
interface Found {
  model: GPT;
  /** A Hugging Face GPT-2 folder's: GPT-2's tokens. */
  pretrained: boolean;
  /** The data folder the run recorded, or null. */
  recorded: string | null;
  /** A `--dataset text` run's: UTF-8 bytes. */
  bytes: boolean;
}

/**
 * The GPT in `dir`: a Hugging Face folder's (config.json) or a run's model.safetensors.
 * @throws CheckpointError naming `dir` when it has neither, saying so when it holds a snapshot.
 */
function findModel(dir: string): Found {
  if (!existsSync(dir)) throw new CheckpointError(dir, "not found (--init-from)");
  if (existsSync(join(dir, "config.json"))) {
    return { model: GPT.fromPretrained(dir), pretrained: true, recorded: null, bytes: false };
  }
  const weights = join(dir, "model.safetensors");
  if (existsSync(weights)) {
    const { model, dataDir, bytes } = loadModelFile(weights);
    return { model, pretrained: false, recorded: dataDir, bytes };
  }
  // A run stopped before its end has its snapshot only, which does not record the GPT's shape.
  const snapshot = ["snapshot.safetensors", "snapshot"].find((name) => existsSync(join(dir, name)));
  const stopped = snapshot === undefined
    ? ""
    : `; its ${snapshot} is a run's that did not reach its end: run it on with --init-from ` +
      "resume and it writes model.safetensors when it finishes";
  throw new CheckpointError(
    dir,
    "has neither model.safetensors (the train job writes it beside the snapshot at the end " +
      `of a run) nor config.json (a Hugging Face GPT-2 folder)${stopped}`,
  );
}

/**
 * Loads the GPT in `dir` (absolute) and its tokenizer: from `dataDir/meta.json` when given, else
 * from the meta.json of the data folder the run recorded, else UTF-8 bytes for a `--dataset text`
 * run, else GPT-2's (nanoGPT's "No meta.pkl found, assuming GPT-2 encodings").
 *
 * @param dir A run folder (model.safetensors, as the train job writes it at the end of a run) or a
 *   Hugging Face GPT-2 folder (config.json and model.safetensors).
 * @param dataDir A data folder whose meta.json decodes the tokens (`--data-dir`), or null.
 * @throws CheckpointError naming the absolute path of the folder or file that is missing or wrong.
 */
export async function loadSampleSource(dir: string, dataDir: string | null): Promise<SampleSource> {
  const { model, pretrained, recorded, bytes } = findModel(dir);
  const notes = [
    `loaded ${pretrained ? "GPT-2 weights from " + dir : join(dir, "model.safetensors")}`,
  ];
  const metaDir = dataDir ?? recorded;
  if (metaDir !== null && existsSync(join(metaDir, "meta.json"))) {
    notes.push(`loading meta from ${join(metaDir, "meta.json")}`);
    return { model, tokenizer: await loadMeta(metaDir), notes };
  }
  if (dataDir !== null) {
    throw new CheckpointError(join(dataDir, "meta.json"), "not found (--data-dir)");
  }
  if (bytes) {
    notes.push("decoding tokens as the bytes of UTF-8 text, as --dataset text trained on them");
    return { model, tokenizer: BYTES, notes };
  }
  // A GPT-2 folder is GPT-2's tokens, as nanoGPT's init_from='gpt2*' assumes.
  if (!pretrained && model.config.vocabSize < GPT2_VOCAB) {
    const where = recorded === null ? "" : ` (the run's data folder ${recorded} has none)`;
    throw new CheckpointError(
      join(dir, "model.safetensors"),
      `its vocabulary of ${model.config.vocabSize} is not GPT-2's and no meta.json decodes it` +
        `${where}: give --data-dir DIR with the meta.json deno task prepare wrote`,
    );
  }
  notes.push("no meta.json found, assuming GPT-2 encodings");
  return { model, tokenizer: await gpt2Tokenizer(), notes };
}

/**
 * Decodes `ids`, each run of ids inside the tokenizer's vocabulary at once; an id beyond it (a
 * model with a vocabulary padded past GPT-2's, as nanoGPT's 50304) reads as U+FFFD.
 */
export function decodeInVocab(codec: Codec, ids: ArrayLike<number>): string {
  let text = "", run: number[] = [];
  for (const id of Array.from(ids)) {
    if (id < codec.vocabSize) {
      run.push(id);
      continue;
    }
    text += codec.decode(run) + "\uFFFD";
    run = [];
  }
  return text + codec.decode(run);
}
