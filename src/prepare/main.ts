/**
 * `deno task prepare`: tokenizes text files into nanoGPT's `train.bin`, `val.bin` and a
 * `meta.json`, as its `data/<name>/prepare.py` scripts do.
 *
 * ```sh
 * deno task prepare --tokenizer char --input input.txt --out data/shakespeare_char
 * ```
 * @module
 */

import { parseArgs } from "node:util";
import { progressBar } from "./_progress.ts";
import { userPath } from "../io/user_cwd.ts";
import {
  DEFAULT_WORKERS,
  prepare,
  PrepareError,
  type PrepareOptions,
  TOKENIZERS,
} from "./prepare.ts";

const USAGE = `usage: deno task prepare --tokenizer ${
  TOKENIZERS.join("|")
} --input FILE... --out DIR
                         [--val-fraction 0.1] [--eot] [--force] [--errors strict|replace]
                         [--workers N]

Tokenizes the input files (UTF-8, read in order as one corpus) and writes into DIR, as nanoGPT's
data/<name>/prepare.py scripts: train.bin (the first 1 - val-fraction of the characters) and
val.bin (the rest), token ids as uint16 little-endian, and meta.json (the tokenizer, its
vocabSize, for char its itos/stoi table, and the token counts).

  --tokenizer NAME      gpt2: GPT-2's BPE, the ids of tiktoken's gpt2 encoding (50257 tokens);
                        char: one token per distinct character of the input, in code-point order
  --input FILE...       one or more text files (repeat --input, or list them after it)
  --out DIR             the output folder (created if missing)
  --val-fraction F      the fraction of the corpus, from its end, that forms val.bin (default 0.1)
  --eot                 gpt2 only: append <|endoftext|> after each input file, as nanoGPT's
                        openwebtext prepare after each document
  --force               overwrite train.bin, val.bin and meta.json if they are there
  --errors strict       bytes of an input that are not UTF-8: strict (the default, as nanoGPT's
                        prepare.py) refuses the file naming the byte; replace reads each as U+FFFD
  --workers N           gpt2 only: encode on N threads (default: every core up to 8, here
                        ${DEFAULT_WORKERS});
                        the ids are the same for every N
  --help                print this and exit
`;

/** What the command line asks for. */
interface PrepareArgs {
  tokenizer: string;
  inputs: string[];
  out: string;
  valFraction: number;
  eot: boolean;
  force: boolean;
  errors: NonNullable<PrepareOptions["errors"]>;
  workers?: number;
}

/**
 * Parses prepare's command line.
 *
 * @param args The arguments after the script name.
 * @returns The arguments, or `"help"` for `--help`.
 * @throws PrepareError naming the flag that is missing or wrong.
 */
export function parsePrepareArgs(args: string[]): PrepareArgs | "help" {
  let parsed;
  try {
    parsed = parseArgs({
      args,
      strict: true,
      allowPositionals: true,
      options: {
        tokenizer: { type: "string" },
        input: { type: "string", multiple: true },
        out: { type: "string" },
        "val-fraction": { type: "string" },
        eot: { type: "boolean" },
        force: { type: "boolean" },
        errors: { type: "string" },
        workers: { type: "string" },
        help: { type: "boolean" },
      },
    });
  } catch (error) {
    throw new PrepareError((error as Error).message);
  }
  const { values, positionals } = parsed;
  if (values.help) return "help";
  if (values.tokenizer === undefined) {
    throw new PrepareError(`--tokenizer: missing; expected one of ${TOKENIZERS.join(", ")}`);
  }
  const inputs = [...(values.input ?? [])];
  // `--input a.txt b.txt`: the files after the first are positionals to parseArgs.
  if (positionals.length > 0 && inputs.length === 0) {
    throw new PrepareError(`unexpected arguments before --input: ${positionals.join(" ")}`);
  }
  inputs.push(...positionals);
  if (inputs.length === 0) throw new PrepareError("--input: missing; give one or more text files");
  if (values.out === undefined) throw new PrepareError("--out: missing; give the output folder");
  const rawFraction = values["val-fraction"] ?? "0.1";
  const valFraction = /^\s*$/.test(rawFraction) ? NaN : Number(rawFraction);
  if (!(valFraction >= 0 && valFraction < 1)) {
    throw new PrepareError(`--val-fraction: must be a number in [0, 1), got "${rawFraction}"`);
  }
  let workers: number | undefined;
  if (values.workers !== undefined) {
    workers = /^\s*$/.test(values.workers) ? NaN : Number(values.workers);
    if (!(Number.isInteger(workers) && workers >= 1)) {
      throw new PrepareError(
        `--workers: must be a whole number at least 1, got "${values.workers}"`,
      );
    }
  }
  // prepare() names an unknown handler.
  const errors = (values.errors ?? "strict") as PrepareArgs["errors"];
  return {
    tokenizer: values.tokenizer,
    // The user's paths, from the folder they ran `deno task prepare` in (src/io/user_cwd.ts):
    // every file error then names the absolute path it tried.
    inputs: inputs.map(userPath),
    out: userPath(values.out),
    valFraction,
    eot: values.eot ?? false,
    force: values.force ?? false,
    errors,
    workers,
  };
}

/**
 * Runs prepare with `args`; prints what it wrote, or the error.
 *
 * @param args The command line.
 * @returns The exit code: 0 done, 2 a wrong argument or an unusable input or output.
 */
export async function main(args: string[]): Promise<number> {
  try {
    const parsed = parsePrepareArgs(args);
    if (parsed === "help") {
      console.log(USAGE);
      return 0;
    }
    let total = 0;
    for (const path of parsed.inputs) {
      try {
        total += Deno.statSync(path).size;
      } catch {
        // prepare names a missing input
      }
    }
    const meta = await prepare({ ...parsed, progress: progressBar(total) });
    console.log(
      `prepare: ${meta.tokenizer} tokenizer, vocabulary ${meta.vocabSize}: ` +
        `${meta.trainTokens} train and ${meta.valTokens} val tokens in ${parsed.out}`,
    );
    return 0;
  } catch (error) {
    if (!(error instanceof PrepareError)) throw error;
    console.error(`prepare: ${error.message} (--help for usage)`);
    return 2;
  }
}

if (import.meta.main) Deno.exit(await main(Deno.args));
