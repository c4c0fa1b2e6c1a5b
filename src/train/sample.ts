/**
 * `deno task sample`: nanoGPT's sample.py. Loads a trained GPT (a run folder's model.safetensors,
 * or a Hugging Face GPT-2 folder), encodes the prompt, and prints `--num-samples` continuations
 * of `--max-new-tokens` tokens, each followed by a line of dashes.
 *
 * ```sh
 * deno task sample --init-from out-shakespeare-char --num-samples 3 --max-new-tokens 200
 * ```
 * @module
 */

import { readFileSync } from "node:fs";
import { parseArgs } from "node:util";
import { CheckpointError } from "../safetensors/errors.ts";
import { noGrad } from "../tensor/autograd.ts";
import { tensor } from "../tensor/creation.ts";
import { FAMILY_NAMES } from "../tensor/device/mod.ts";
import { manualSeed } from "../tensor/random.ts";
import { decodeInVocab, loadSampleSource } from "./_sample_source.ts";
import { deviceProblem, processDevice, type TrainDevice } from "./devices.ts";
import { userPath } from "../io/user_cwd.ts";

/** The script's `--help` text. */
export const SAMPLE_USAGE = `usage: deno task sample [options]   (nanoGPT's sample.py)

  --init-from DIR          a run folder (its model.safetensors, which the train job writes beside
                           the snapshot at the end of a run) or a Hugging Face GPT-2 folder
                           (config.json, model.safetensors) (default out)
  --start TEXT|FILE:PATH   the prompt, or the text of the file PATH (default "\\n")
  --num-samples N          samples to draw (default 10)
  --max-new-tokens N       tokens generated in each sample (default 500)
  --temperature X          divides the logits: < 1 less random, > 1 more (default 0.8)
  --top-k N                sample among the N most likely tokens only, 0 = all (default 200)
  --seed N                 (default 1337)
  --device ${FAMILY_NAMES.join("|")} (default cpu)
  --data-dir DIR           the data folder whose meta.json decodes the tokens (default: the one
                           the run trained on; GPT-2's tokenizer without one)

Relative paths are the folder's you ran the command from (INIT_CWD under deno task).`;

/** A bad command line: the message names the flag. */
export class SampleUsageError extends Error {
  /**
   * Builds the error.
   *
   * @param message What is wrong, naming the flag.
   */
  constructor(message: string) {
    super(message);
    this.name = "SampleUsageError";
  }
}

/** The settings of a sampling run, as nanoGPT's sample.py names them. */
export interface SampleOptions {
  /** Absolute path of the model's folder. */
  initFrom: string;
  /** The prompt's text (a FILE: prompt already read). */
  start: string;
  /** Samples to draw (nanoGPT's num_samples). */
  numSamples: number;
  /** Tokens generated after the prompt in each sample. */
  maxNewTokens: number;
  /** Divides the logits before sampling. */
  temperature: number;
  /** Sample among the k most likely tokens; null: every token. */
  topK: number | null;
  /** The random generator's seed, set once before the first sample. */
  seed: number;
  /** The device family the model runs on (`--device`). */
  device: TrainDevice;
  /** Absolute path of the data folder with meta.json, or null. */
  dataDir: string | null;
}

/** `text` as an integer of at least `min`, or a usage error naming `flag`. */
function integer(flag: string, text: string, min: number): number {
  const value = Number(text);
  if (!/^\s*\d+\s*$/.test(text) || !Number.isSafeInteger(value) || value < min) {
    throw new SampleUsageError(
      `${flag}: expected an integer >= ${min}, got ${JSON.stringify(text)}`,
    );
  }
  return value;
}

/**
 * Parses the command line.
 *
 * @param args The arguments after the script.
 * @returns The options, or "help" for `--help`.
 * @throws SampleUsageError naming the flag that is unknown, lacks its value or has a bad one.
 * @throws CheckpointError naming the absolute path of a `--start FILE:` that cannot be read.
 */
export function parseSampleArgs(args: string[]): SampleOptions | "help" {
  let values: Record<string, string | boolean | undefined>;
  try {
    const string = { type: "string" } as const;
    values = parseArgs({
      args,
      strict: true,
      allowPositionals: false,
      options: {
        "init-from": string,
        start: string,
        "num-samples": string,
        "max-new-tokens": string,
        temperature: string,
        "top-k": string,
        seed: string,
        device: string,
        "data-dir": string,
        help: { type: "boolean", short: "h" },
      },
    }).values;
  } catch (error) {
    // node's messages quote the argument: "Unknown option '--topk'", "Option '--seed <value>' ..."
    const message = (error as Error).message;
    const flag = /'(-[^' ]+)/.exec(message)?.[1];
    const what = /Unknown option/.test(message)
      ? `${flag}: unknown flag`
      : /Unexpected argument|positional/.test(message)
      ? `${flag ?? args.join(" ")}: unexpected argument (every option is --name VALUE)`
      : /ambiguous/.test(message)
      ? `${flag}: expects a value (one that starts with a dash goes as ${flag}=VALUE)`
      : /argument missing|value/.test(message)
      ? `${flag}: expects a value`
      : message;
    throw new SampleUsageError(what);
  }
  if (values.help) return "help";
  const text = (flag: string, fallback: string) => (values[flag] as string | undefined) ?? fallback;
  const temperature = Number(text("temperature", "0.8"));
  if (!(temperature > 0 && Number.isFinite(temperature))) {
    throw new SampleUsageError(
      `--temperature: expected a positive number, got ${JSON.stringify(text("temperature", ""))}`,
    );
  }
  const device = text("device", "cpu");
  if (!(FAMILY_NAMES as readonly string[]).includes(device)) {
    throw new SampleUsageError(
      `--device: expected ${FAMILY_NAMES.join(" or ")}, got ${JSON.stringify(device)}`,
    );
  }
  let start = text("start", "\n");
  if (start.startsWith("FILE:")) {
    const path = userPath(start.slice("FILE:".length));
    try {
      start = readFileSync(path, "utf8");
    } catch (error) {
      throw new CheckpointError(path, `cannot read the --start file: ${(error as Error).message}`);
    }
  }
  if (start.length === 0) throw new SampleUsageError("--start: empty; the prompt needs a token");
  const topK = integer("--top-k", text("top-k", "200"), 0);
  const dataDir = values["data-dir"] as string | undefined;
  return {
    initFrom: userPath(text("init-from", "out")),
    start,
    numSamples: integer("--num-samples", text("num-samples", "10"), 1),
    maxNewTokens: integer("--max-new-tokens", text("max-new-tokens", "500"), 0),
    temperature,
    topK: topK === 0 ? null : topK,
    seed: integer("--seed", text("seed", "1337"), 0),
    device: device as TrainDevice,
    dataDir: dataDir === undefined ? null : userPath(dataDir),
  };
}

/**
 * Draws the samples of `options`, as nanoGPT's sample.py: seeded once, each sample the prompt
 * and its continuation decoded.
 *
 * @param options The parsed settings.
 * @param print Where the samples and their separators go (default console.log).
 * @param note Where the loading notes go (default console.error, to keep stdout the samples').
 * @throws CheckpointError naming the absolute path of a model or meta.json that cannot be read.
 * @throws SampleUsageError when the prompt has characters the tokenizer lacks.
 */
export async function sample(
  options: SampleOptions,
  print: (line: string) => void = console.log,
  note: (line: string) => void = console.error,
): Promise<void> {
  const { model, tokenizer, notes } = await loadSampleSource(options.initFrom, options.dataDir);
  for (const line of notes) note(line);
  const device = processDevice(options.device);
  model.to(device);
  model.eval();
  let ids: number[];
  try {
    ids = Array.from(tokenizer.encode(options.start));
  } catch (error) {
    throw new SampleUsageError(`--start: ${(error as Error).message}`);
  }
  if (ids.length === 0) throw new SampleUsageError("--start: encodes to no token");
  const outside = ids.find((id) => id >= model.config.vocabSize);
  if (outside !== undefined) {
    throw new SampleUsageError(
      `--start: token ${outside} is outside the model's vocabulary of ${model.config.vocabSize}`,
    );
  }
  manualSeed(options.seed);
  const x = tensor(Int32Array.from(ids), [1, ids.length], { dtype: "i32", device });
  const topK = options.topK ?? undefined;
  for (let k = 0; k < options.numSamples; k++) {
    const y = noGrad(() =>
      model.generate(x, options.maxNewTokens, { temperature: options.temperature, topK })
    );
    print(decodeInVocab(tokenizer, y.toArray()));
    print("---------------");
    y.dispose();
  }
  x.dispose();
}

/** Runs the script; resolves to its exit code (2 for a bad command line or file). */
export async function main(args: string[]): Promise<number> {
  try {
    const options = parseSampleArgs(args);
    if (options === "help") {
      console.log(SAMPLE_USAGE);
      return 0;
    }
    const problem = deviceProblem(options.device, 1);
    if (problem !== null) throw new SampleUsageError(problem);
    await sample(options);
    return 0;
  } catch (error) {
    if (!(error instanceof SampleUsageError || error instanceof CheckpointError)) throw error;
    const hint = error instanceof SampleUsageError ? "\n(see --help)" : "";
    console.error(`sample: ${error.message}${hint}`);
    return 2;
  }
}

if (import.meta.main) Deno.exit(await main(Deno.args));
