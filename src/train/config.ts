/**
 * The training job's configuration: defaults, an optional JSON file, then command-line flags,
 * validated in one place with zod. Every invalid input becomes a {@linkcode ConfigError} naming the
 * field, which the entry point turns into exit code 2.
 * @module
 */

import { existsSync } from "node:fs";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import type { z } from "zod";
import { quote } from "../io/printable.ts";
import { badFlagValue, decimalNumber, settleMasterPort, splitNodes } from "../launch/options.ts";
import { userPath } from "../io/user_cwd.ts";
import { FLAGS, setFileSpellings, spelled } from "./_flags.ts";
import { readConfigFile } from "./_config_file.ts";
import { checkOneKind } from "./_training_kinds.ts";
import { discardProfile, unwritableTrace } from "../profile/tracer.ts";
import { CheckpointError } from "../safetensors/errors.ts";
import { readPretrainedConfig } from "../nn/gpt_pretrained.ts";
import { exceedsMemory, type GptSizes } from "./footprint.ts";
import {
  ConfigError,
  DEFAULTS,
  FSDP_SNAPSHOTS,
  GPT_DEFAULTS,
  TOKENS_DEFAULTS,
  type TrainConfig,
  TrainConfigSchema,
} from "./_schema.ts";
import { checkLayoutFits, resolveDegrees, shardedSnapshots } from "./_layout.ts";

export {
  ConfigError,
  DEFAULTS,
  FSDP_SNAPSHOTS,
  GPT_DEFAULTS,
  TOKENS_DEFAULTS,
  type TrainConfig,
  TrainConfigSchema,
};
export { USAGE } from "./usage.ts";

const fieldsOf = (is: (value: unknown) => boolean) =>
  new Set<keyof TrainConfig>(
    Object.entries(DEFAULTS).filter(([, v]) => is(v)).map(([k]) => k as keyof TrainConfig),
  );
const NUMERIC = fieldsOf((v) => typeof v === "number");
const BOOLEAN = fieldsOf((v) => typeof v === "boolean");
/** The spellings a boolean flag takes: nanoGPT's True/False, and true/false, 1/0. */
const BOOLEANS: Record<string, boolean> = {
  true: true,
  True: true,
  "1": true,
  false: false,
  False: false,
  "0": false,
};

/** A zod issue as one message naming the field and the value seen, escaped (it may be a file's). */
function formatIssue(issue: z.core.$ZodIssue): ConfigError {
  const field = issue.path.length ? issue.path.join(".") : "config";
  if (issue.code === "unrecognized_keys") {
    const keys = issue.keys.map(quote).join(", ");
    return new ConfigError(field, `Unrecognized key${issue.keys.length > 1 ? "s" : ""}: ${keys}`);
  }
  return new ConfigError(field, `${issue.message} (got ${quote(issue.input)})`);
}

/**
 * Parses command-line arguments (and the `--config` file they name: JSON with camelCase keys, or
 * a nanoGPT config `.py`) into a validated config: the defaults (with `--model gpt` or
 * `--dataset tokens` their own), then the file, then the flags.
 *
 * @param args The arguments after the script name.
 * @param notes Collects a line for each setting of a nanoGPT config file that is read and ignored
 *   (wandb_*, compile, ...), for the job to print.
 * @returns The config, or `"help"` when `--help` was asked for.
 * @throws ConfigError for any invalid input, naming the field.
 */
export function parseTrainArgs(args: string[], notes: string[] = []): TrainConfig | "help" {
  setFileSpellings(new Map());
  const options: Record<string, { type: "string" | "boolean" }> = {
    config: { type: "string" },
    help: { type: "boolean" },
    standalone: { type: "boolean" },
  };
  for (const flag of Object.keys(FLAGS)) options[flag] = { type: "string" };
  // Every flag but --help and --standalone takes a value, so positionals are known without parseArgs, which would
  // read a negative positional such as `-1` as an unknown short option.
  const flagArgs: string[] = [], positionals: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    if (!arg.startsWith("--")) {
      positionals.push(arg);
      continue;
    }
    const eq = arg.indexOf("=");
    const flag = eq < 0 ? arg : arg.slice(0, eq);
    if (arg === "--help" || arg === "--standalone" || !Object.hasOwn(options, flag.slice(2))) {
      flagArgs.push(arg); // parseArgs names an unknown flag
      continue;
    }
    const value = eq < 0 ? args[i + 1] : arg.slice(eq + 1);
    const problem = badFlagValue(value);
    if (problem !== null) throw new ConfigError(flag, problem);
    flagArgs.push(`${flag}=${value}`);
    if (eq < 0) i++;
  }
  let parsed;
  try {
    parsed = parseArgs({ args: flagArgs, options, allowPositionals: false, strict: true });
  } catch (error) {
    throw new ConfigError("arguments", (error as Error).message);
  }
  if (parsed.values.help) return "help";
  const fromFile: Record<string, unknown> = {}, given: Record<string, unknown> = {};
  let datasetName: string | undefined;
  let fileKeys = new Map<string, string>();
  if (typeof parsed.values.config === "string") {
    const read = readConfigFile(userPath(parsed.values.config), notes);
    Object.assign(fromFile, read.fields);
    datasetName = read.datasetName;
    fileKeys = read.keys;
  }
  if (parsed.values.standalone) given.standalone = true;

  if (positionals.length > 2) {
    throw new ConfigError(
      "arguments",
      `unexpected extra arguments: ${positionals.slice(2).join(" ")}`,
    );
  }
  const fromCli: [keyof TrainConfig, string][] = [];
  if (positionals[0] !== undefined) fromCli.push(["epochs", positionals[0]]);
  if (positionals[1] !== undefined) fromCli.push(["saveEvery", positionals[1]]);
  for (const [flag, field] of Object.entries(FLAGS)) {
    const value = parsed.values[flag];
    if (typeof value === "string") fromCli.push([field, value]);
  }
  for (const [field, raw] of fromCli) {
    const range = field === "nnodes" ? splitNodes(raw) : null;
    if (range !== null) Object.assign(given, range);
    else given[field] = convert(field, raw);
  }
  // A flag overrides the file: the error names the flag then.
  const overridden = (field: string) =>
    given[field] !== undefined || (field === "snapshot" && given.outDir !== undefined);
  setFileSpellings(new Map([...fileKeys].filter(([field]) => !overridden(field))));
  const all = { ...fromFile, ...given };
  checkOneKind(all);
  const tokens = all.dataset === "tokens";
  const base = tokens
    ? { ...DEFAULTS, ...GPT_DEFAULTS, ...TOKENS_DEFAULTS }
    : all.model === "gpt"
    ? { ...DEFAULTS, ...GPT_DEFAULTS }
    : { ...DEFAULTS };
  // FSDP's, TP's and PP's snapshots are sharded folders.
  const degrees = { tp: Number(all.tp ?? 1), pp: Number(all.pp ?? 1) };
  const fsdp = shardedSnapshots({ strategy: all.strategy as "fsdp", ...degrees });
  if (fsdp) base.snapshot = all.model === "gpt" ? FSDP_SNAPSHOTS.gpt : FSDP_SNAPSHOTS.other;
  // nanoGPT's out_dir names the snapshot's folder; of the two, the later given (flags after the
  // file) wins, and --snapshot over --out-dir.
  const inDir = (dir: unknown) =>
    typeof dir === "string" ? join(dir, fsdp ? "snapshot" : "snapshot.safetensors") : undefined;
  const typed = given.snapshot ?? inDir(given.outDir) ?? fromFile.snapshot ??
    inDir(fromFile.outDir);
  const snapshot = typed ?? (tokens ? inDir(base.outDir) : undefined);
  if (snapshot !== undefined) all.snapshot = snapshot;
  // The paths the user gave are theirs; the defaults stay where the job keeps its runs (under
  // deno task, the repository's root).
  const usersPaths = new Set(Object.keys({ ...fromFile, ...given }));
  if (typed !== undefined) usersPaths.add("snapshot");
  // nanoGPT's `dataset = 'name'` reads data/<name>, unless a data dir is given.
  if (all.dataDir === undefined && datasetName !== undefined) {
    all.dataDir = join("data", datasetName);
    usersPaths.add("dataDir");
  }
  if (tokens && all.gradientAccumulationSteps === undefined) {
    all.gradientAccumulationSteps = defaultAccumulation({ ...base, ...all } as TrainConfig);
  }
  const settled = { ...base, ...all } as TrainConfig;
  // Absolute either way, so that every file error names the path it tried.
  for (const field of PATH_FIELDS) {
    const path = settled[field];
    if (path !== "") settled[field] = usersPaths.has(field) ? userPath(path) : resolve(path);
  }
  if (settled.initFrom !== "scratch" && settled.initFrom !== "resume") {
    settled.initFrom = userPath(settled.initFrom);
  }
  const portProblem = settleMasterPort(settled, new Set(Object.keys(all)));
  if (portProblem !== null) throw new ConfigError(portProblem.flag, portProblem.message);
  const config = validateConfig(settled);
  // The ranks write the trace when the run ends: a path they cannot write is refused now.
  const trace = config.profile || Deno.env.get("DTRAIN_PROFILE");
  const unwritable = trace ? unwritableTrace(trace) : null;
  if (unwritable !== null) {
    discardProfile();
    throw new ConfigError(config.profile ? "profile" : "DTRAIN_PROFILE", unwritable);
  }
  return config;
}

function convert(field: keyof TrainConfig, raw: string): unknown {
  if (field === "hidden") return raw.split(",").map((s) => parseNumber(field, s));
  if (BOOLEAN.has(field)) {
    const value = BOOLEANS[raw];
    if (value === undefined) {
      throw new ConfigError(
        field,
        `expected true or false (or True, False, 1, 0), got ${quote(raw)}`,
      );
    }
    return value;
  }
  return NUMERIC.has(field) ? parseNumber(field, raw) : raw;
}

/** Fields that hold a path the user typed, resolved from the folder they typed it in. */
const PATH_FIELDS = ["dataRoot", "dataDir", "outDir", "snapshot", "profile", "logDir"] as const;

/** The world size the job (or, on a rank, its launcher) runs at. */
function worldSizeOf(config: TrainConfig): number {
  const launched = Number(Deno.env.get("WORLD_SIZE"));
  return Deno.env.get("RANK") !== undefined && launched > 0
    ? launched
    : config.nprocPerNode * config.nnodes;
}

/**
 * `--gradient-accumulation-steps` when the user did not set it: one micro-step per data-parallel
 * rank, so the default works on any world size (nanoGPT's value is the global count, divided by
 * the world size, and its train.py asserts that it divides).
 */
function defaultAccumulation(config: TrainConfig): number {
  const dpSize = worldSizeOf(config) / (config.tp || 1);
  return Number.isInteger(dpSize) && dpSize > 0 ? dpSize : 1;
}

function parseNumber(field: string, raw: string): number {
  const value = decimalNumber(raw);
  if (typeof value === "string") throw new ConfigError(field, value);
  return value;
}

/** Validates a complete config object (all fields present), naming the first bad field. */
export function validateConfig(value: unknown): TrainConfig {
  const result = TrainConfigSchema.safeParse(value, { reportInput: true });
  if (!result.success) throw formatIssue(result.error.issues[0]);
  const config = result.data;
  if (config.minNodes !== undefined && config.minNodes > config.nnodes) {
    throw new ConfigError(
      "nnodes",
      `MIN must not exceed MAX in --nnodes MIN:MAX, got ${config.minNodes}:${config.nnodes}`,
    );
  }
  const textModel = config.model === "gpt";
  const textData = config.dataset === "text" || config.dataset === "tokens";
  if (textModel !== textData) {
    throw new ConfigError(
      textModel ? "dataset" : "model",
      textModel
        ? `the gpt model trains on --dataset text, got "${config.dataset}" (or on --dataset ` +
          `tokens, nanoGPT's .bin files)`
        : `--dataset ${config.dataset} needs --model gpt, got "${config.model}"`,
    );
  }
  if (config.nEmbd % config.nHead !== 0) {
    throw new ConfigError(
      "nHead",
      `must divide ${spelled("nEmbd")} (${config.nEmbd}), got ${config.nHead}`,
    );
  }
  checkLayoutFits(config);
  if (config.asyncSnapshots && !shardedSnapshots(config)) {
    throw new ConfigError(
      "asyncSnapshots",
      "writes sharded snapshots in the background (--strategy fsdp, --tp or --pp); a " +
        "--strategy ddp snapshot is one file that rank 0 writes, got --async-snapshots true",
    );
  }
  // An elastic job's world size is known when it starts (each rank resolves the degrees again).
  const worldSize = config.nprocPerNode * config.nnodes;
  const world = `--nproc-per-node ${config.nprocPerNode} × --nnodes ${config.nnodes}`;
  if (config.minNodes === undefined || config.minNodes === config.nnodes) {
    resolveDegrees(config, worldSize, world);
  }
  const pretrained = config.dataset === "tokens" ? checkIterations(config) : undefined;
  if (config.nodeRank >= config.nnodes) {
    throw new ConfigError(
      "nodeRank",
      `must be below ${spelled("nnodes")} (${config.nnodes}), got ${config.nodeRank}`,
    );
  }
  const tooBig = exceedsMemory(config, undefined, pretrained);
  if (tooBig !== null) {
    const field = pretrained ? "initFrom" : config.model === "gpt" ? "nEmbd" : "hidden";
    throw new ConfigError(field, tooBig);
  }
  return config;
}

/**
 * What iteration-based training (`--dataset tokens`) needs of its settings; returns the sizes of
 * the `--init-from` folder's model, checked against its weights' header, when there is one.
 */
function checkIterations(config: TrainConfig): GptSizes | undefined {
  if (config.dataDir === "") {
    throw new ConfigError(
      "dataDir",
      "--dataset tokens needs --data-dir DIR, with train.bin, val.bin and meta.json " +
        "(deno task prepare writes them), or a nanoGPT config's dataset",
    );
  }
  const from = config.initFrom;
  if (from !== "scratch" && from !== "resume" && !existsSync(join(from, "config.json"))) {
    throw new ConfigError(
      "initFrom",
      `expected scratch, resume or a folder of GPT-2 weights (Hugging Face's config.json and ` +
        `model.safetensors; nothing is downloaded), got ${quote(from)}`,
    );
  }
  // The ranks of one TP group run one replica's micro-steps together. An elastic job's world
  // size is known on its ranks (WORLD_SIZE), which check it again.
  const worldSize = worldSizeOf(config), dpSize = worldSize / config.tp;
  const elastic = config.minNodes !== undefined && config.minNodes !== config.nnodes;
  const steps = config.gradientAccumulationSteps;
  if (!elastic && Number.isInteger(dpSize) && steps % dpSize !== 0) {
    const size = config.tp === 1
      ? `the world size (${worldSize} processes)`
      : `the data-parallel size (${dpSize}: ${worldSize} processes / --tp ${config.tp})`;
    const below = steps - (steps % dpSize), above = below + dpSize;
    const works = below > 0 ? `${below} or ${above}` : `${above}`;
    throw new ConfigError(
      "gradientAccumulationSteps",
      `must be a multiple of ${size}: as nanoGPT's train.py, it counts the micro-steps of an ` +
        `iteration over all ranks, and each runs 1/${dpSize} of them; ${works} would work ` +
        `(left unset, it is ${dpSize}), got ${steps}`,
    );
  }
  if (config.decayLr && config.lrDecayIters <= config.warmupIters) {
    throw new ConfigError(
      "lrDecayIters",
      `must exceed ${
        spelled("warmupIters")
      } (${config.warmupIters}): nanoGPT's get_lr decays over the ` +
        `iterations between them, got ${config.lrDecayIters}`,
    );
  }
  return from === "scratch" || from === "resume" ? undefined : pretrainedSizes(from);
}

/** The sizes of the model in the GPT-2 folder `dir`, read before any process builds it. */
function pretrainedSizes(dir: string): GptSizes {
  try {
    const { nLayer, nEmbd, blockSize, vocabSize } = readPretrainedConfig(dir, {});
    return { nLayer, nEmbd, blockSize, vocabSize, source: `${dir}/config.json's` };
  } catch (error) {
    if (error instanceof CheckpointError) throw new ConfigError("initFrom", error.message);
    throw error;
  }
}
