/**
 * The training job's configuration: defaults, an optional JSON file, then command-line flags,
 * validated in one place with zod. Every invalid input becomes a {@linkcode ConfigError} naming the
 * field, which the entry point turns into exit code 2.
 * @module
 */

import { parseArgs } from "node:util";
import { z } from "zod";
import {
  badFlagValue,
  decimalNumber,
  LAUNCHER_DEFAULTS,
  LAUNCHER_FLAGS,
  LauncherFieldsSchema,
  splitNodes,
} from "../launch/options.ts";
import { discardProfile, unwritableTrace } from "../profile/tracer.ts";
import { exceedsMemory } from "./footprint.ts";

/** An invalid configuration or command line; `field` names the culprit. */
export class ConfigError extends Error {
  /**
   * @param field The offending field or flag.
   * @param message What is wrong with it.
   */
  constructor(readonly field: string, message: string) {
    super(`${field}: ${message}`);
    this.name = "ConfigError";
  }
}

const positiveInt = z.number().int().positive();

/** The schema of a training configuration (also the JSON accepted by `--config`). */
export const TrainConfigSchema = z.object({
  epochs: z.number().int().nonnegative(),
  saveEvery: positiveInt,
  saveEverySteps: z.number().int().nonnegative(),
  batchSize: positiveInt,
  lr: z.number().positive(),
  momentum: z.number().min(0).lt(1),
  weightDecay: z.number().nonnegative(),
  optimizer: z.enum(["sgd", "adamw"]),
  lrSchedule: z.enum(["constant", "cosine"]),
  warmupSteps: z.number().int().nonnegative(),
  model: z.enum(["mlp", "linear", "gpt"]),
  hidden: z.array(positiveInt).min(1),
  blockSize: positiveInt,
  nLayer: positiveInt,
  nHead: positiveInt,
  nEmbd: positiveInt,
  dropout: z.number().min(0).lt(1),
  dataset: z.enum(["fashion-mnist", "synthetic", "text"]),
  dataRoot: z.string(),
  snapshot: z.string().min(1),
  seed: z.number().int().nonnegative(),
  threads: z.number().int().nonnegative(),
  maxSteps: z.number().int().nonnegative(),
  logEvery: z.number().int().nonnegative(),
  device: z.enum(["cpu", "cuda", "emu"]),
  strategy: z.enum(["ddp", "fsdp"]),
  profile: z.string(),
}).extend(LauncherFieldsSchema.shape).strict();

/** A validated training configuration. */
export type TrainConfig = z.infer<typeof TrainConfigSchema>;

/** The defaults: a 2-process DDP run that trains the MLP on Fashion-MNIST in well under a minute. */
export const DEFAULTS: TrainConfig = {
  epochs: 3,
  saveEvery: 1,
  saveEverySteps: 0,
  batchSize: 64,
  lr: 0.05,
  momentum: 0.9,
  weightDecay: 0,
  optimizer: "sgd",
  lrSchedule: "constant",
  warmupSteps: 0,
  model: "mlp",
  hidden: [512, 512],
  blockSize: 128,
  nLayer: 4,
  nHead: 4,
  nEmbd: 160,
  dropout: 0,
  dataset: "fashion-mnist",
  dataRoot: "",
  snapshot: "runs/default/snapshot.safetensors",
  seed: 0,
  threads: 0,
  maxSteps: 0,
  logEvery: 0,
  device: "cpu",
  strategy: "ddp",
  profile: "",
  ...LAUNCHER_DEFAULTS,
  nprocPerNode: 2,
};

/**
 * What `--model gpt` changes in the defaults: a byte-level GPT of about 1.3 M parameters on the
 * fortunes corpus with AdamW and a warmed-up cosine schedule, sized to finish one epoch in well
 * under 10 minutes on 2 processes × 1 core.
 */
export const GPT_DEFAULTS: Partial<TrainConfig> = {
  dataset: "text",
  optimizer: "adamw",
  lr: 3e-3,
  lrSchedule: "cosine",
  warmupSteps: 50,
  weightDecay: 0.1,
  batchSize: 16,
  epochs: 1,
  snapshot: "runs/gpt/snapshot.safetensors",
};

/**
 * Where `--strategy fsdp` keeps its snapshot when `--snapshot` is not given: a sharded folder, in a
 * run folder of its own (a DDP snapshot is one file, and the two do not resume each other).
 */
export const FSDP_SNAPSHOTS = { gpt: "runs/gpt-fsdp/snapshot", other: "runs/fsdp/snapshot" };

/** Command-line flags: kebab-case names of the config fields, each a string until validated. */
const FLAGS = {
  epochs: "epochs",
  "save-every": "saveEvery",
  "save-every-steps": "saveEverySteps",
  "batch-size": "batchSize",
  lr: "lr",
  momentum: "momentum",
  "weight-decay": "weightDecay",
  optimizer: "optimizer",
  "lr-schedule": "lrSchedule",
  "warmup-steps": "warmupSteps",
  model: "model",
  hidden: "hidden",
  "block-size": "blockSize",
  "n-layer": "nLayer",
  "n-head": "nHead",
  "n-embd": "nEmbd",
  dropout: "dropout",
  dataset: "dataset",
  "data-root": "dataRoot",
  snapshot: "snapshot",
  seed: "seed",
  threads: "threads",
  "max-steps": "maxSteps",
  "log-every": "logEvery",
  device: "device",
  strategy: "strategy",
  profile: "profile",
  ...LAUNCHER_FLAGS,
} as const satisfies Record<string, keyof TrainConfig>;

const NUMERIC = new Set<keyof TrainConfig>(
  Object.entries(DEFAULTS).filter(([, v]) => typeof v === "number").map(([k]) =>
    k as keyof TrainConfig
  ),
);

/** The usage text printed by `--help`. */
export const USAGE = `usage: deno task train [EPOCHS SAVE_EVERY] [options]

  EPOCHS SAVE_EVERY        the original project's positional form (same as --epochs, --save-every)
  --epochs N               epochs to train (default ${DEFAULTS.epochs})
  --save-every N           write a snapshot every N epochs (default ${DEFAULTS.saveEvery})
  --save-every-steps N     also every N steps within an epoch (default 0: off); a job restarted
                           from one goes on from that sample, at any world size
  --batch-size N           samples per batch and process (default ${DEFAULTS.batchSize})
  --lr X                   learning rate (default ${DEFAULTS.lr})
  --optimizer sgd|adamw    (default ${DEFAULTS.optimizer}); --momentum X, --weight-decay X
  --lr-schedule constant|cosine (default ${DEFAULTS.lrSchedule}); cosine: linear warmup over
                           --warmup-steps N, then a cosine decay to lr/10 at the last step
  --model mlp|linear|gpt   (default ${DEFAULTS.model}); --hidden 512,512 for the MLP's hidden sizes
  --dataset fashion-mnist|synthetic|text (default ${DEFAULTS.dataset}; text with gpt)
  --data-root DIR          the data set's folder (default: its Debian package's)
  --block-size N --n-layer N --n-head N --n-embd N --dropout X
                           the GPT's shape (defaults ${DEFAULTS.blockSize}, ${DEFAULTS.nLayer}, ${DEFAULTS.nHead}, ${DEFAULTS.nEmbd}, ${DEFAULTS.dropout}); --model gpt
                           also defaults to --dataset text --optimizer adamw --lr ${GPT_DEFAULTS.lr}
                           --lr-schedule cosine --warmup-steps ${GPT_DEFAULTS.warmupSteps} --weight-decay ${GPT_DEFAULTS.weightDecay} --batch-size ${GPT_DEFAULTS.batchSize} --epochs ${GPT_DEFAULTS.epochs} --snapshot ${GPT_DEFAULTS.snapshot}
  --snapshot PATH          snapshot file; an existing one is resumed (default ${DEFAULTS.snapshot});
                           metrics.jsonl, report.html and logs/ (one per rank) go beside it
  --config FILE.json       settings as JSON (camelCase keys); flags override it
  --seed N, --threads N (BLAS threads per process, 0 = automatic)
  --max-steps N            stop after N optimizer steps over the whole run, resumed ones included
                           (default 0: no limit); the snapshot then resumes mid-epoch
  --log-every N            log the loss, learning rate, throughput and gradient norm every N steps
                           (default 0: about 10 times an epoch), to the console and metrics.jsonl
  --nproc-per-node N       worker processes on this machine (default ${DEFAULTS.nprocPerNode}; 1 = no launcher)
  --nnodes N|MIN:MAX --node-rank R --master-addr A --master-port P --max-restarts K --log-dir D
                           multi-node launch, spelled like torchrun (--log-dir: default logs/
                           beside the snapshot)
  --device cpu|cuda|emu    (default cpu) cuda: one GPU per process; emu: the emulated
                           accelerator (a GPU's contract over the CPU kernels, for CI)
  --strategy ddp|fsdp      (default ${DEFAULTS.strategy}) ddp: every process keeps the whole model; fsdp: the
                           parameters, gradients and optimizer state are sharded over the processes
                           (each GPT block, each MLP layer, then the rest), the snapshot is a
                           sharded folder (default ${FSDP_SNAPSHOTS.other}, with gpt ${FSDP_SNAPSHOTS.gpt})
                           that resumes on any --nproc-per-node, and the final model goes to
                           model.safetensors beside it
  --profile PATH           write a Chrome trace (Perfetto, chrome://tracing) of every rank to PATH
`;

function formatIssue(issue: z.core.$ZodIssue): ConfigError {
  const field = issue.path.length ? issue.path.join(".") : "config";
  return new ConfigError(field, issue.message);
}

/**
 * Parses command-line arguments (and the `--config` file they name) into a validated config.
 *
 * @param args The arguments after the script name.
 * @returns The config, or `"help"` when `--help` was asked for.
 * @throws ConfigError for any invalid input, naming the field.
 */
export function parseTrainArgs(args: string[]): TrainConfig | "help" {
  const options: Record<string, { type: "string" | "boolean" }> = {
    config: { type: "string" },
    help: { type: "boolean" },
  };
  for (const flag of Object.keys(FLAGS)) options[flag] = { type: "string" };
  // Every flag but --help takes a value, so positionals are known without parseArgs, which would
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
    if (arg === "--help" || !(flag.slice(2) in options)) {
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
  const given: Record<string, unknown> = {};
  if (typeof parsed.values.config === "string") {
    Object.assign(given, readConfigFile(parsed.values.config));
  }

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
  const base = given.model === "gpt" ? { ...DEFAULTS, ...GPT_DEFAULTS } : { ...DEFAULTS };
  if (given.strategy === "fsdp") {
    base.snapshot = given.model === "gpt" ? FSDP_SNAPSHOTS.gpt : FSDP_SNAPSHOTS.other;
  }
  const config = validateConfig({ ...base, ...given });
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
  return NUMERIC.has(field) ? parseNumber(field, raw) : raw;
}

function parseNumber(field: string, raw: string): number {
  const value = decimalNumber(raw);
  if (typeof value === "string") throw new ConfigError(field, value);
  return value;
}

function readConfigFile(path: string): Record<string, unknown> {
  let text: string;
  try {
    text = Deno.readTextFileSync(path);
  } catch (error) {
    throw new ConfigError("config", `cannot read ${path}: ${(error as Error).message}`);
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new ConfigError("config", `${path} is not valid JSON: ${(error as Error).message}`);
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw new ConfigError("config", `${path} must hold a JSON object`);
  }
  return value as Record<string, unknown>;
}

/** Validates a complete config object (all fields present), naming the first bad field. */
export function validateConfig(value: unknown): TrainConfig {
  const result = TrainConfigSchema.safeParse(value);
  if (!result.success) throw formatIssue(result.error.issues[0]);
  const config = result.data;
  if (config.minNodes !== undefined && config.minNodes > config.nnodes) {
    throw new ConfigError(
      "nnodes",
      `MIN must not exceed MAX in --nnodes MIN:MAX, got ${config.minNodes}:${config.nnodes}`,
    );
  }
  const textModel = config.model === "gpt", textData = config.dataset === "text";
  if (textModel !== textData) {
    throw new ConfigError(
      textModel ? "dataset" : "model",
      textModel
        ? `the gpt model trains on --dataset text, got "${config.dataset}"`
        : `--dataset text needs --model gpt, got "${config.model}"`,
    );
  }
  if (config.nEmbd % config.nHead !== 0) {
    throw new ConfigError("nHead", `must divide nEmbd (${config.nEmbd}), got ${config.nHead}`);
  }
  if (config.nodeRank >= config.nnodes) {
    throw new ConfigError(
      "nodeRank",
      `must be below nnodes (${config.nnodes}), got ${config.nodeRank}`,
    );
  }
  const tooBig = exceedsMemory(config);
  if (tooBig !== null) throw new ConfigError(config.model === "gpt" ? "nEmbd" : "hidden", tooBig);
  return config;
}
