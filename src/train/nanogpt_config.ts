/**
 * Reading a nanoGPT config file (`config/train_shakespeare_char.py` and the like) as it is: its
 * `key = literal` lines (ints, floats such as `1e-3`, strings in ' or ", True/False), comments and
 * blank lines, with nanoGPT's snake_case names mapped to the train job's fields. nanoGPT `exec`s
 * the file; this reads only literals and refuses anything else, naming the line.
 * @module
 */

import { printable, quote } from "../io/printable.ts";
import type { TrainConfig } from "./_schema.ts";

/** A Python literal as read: an int or float, a string, or a bool. */
export type PyLiteral = number | string | boolean;

/** What a nanoGPT config file sets, as the job's fields. */
export interface NanoGptConfig {
  /** The job's fields the file sets (camelCase). */
  fields: Partial<Record<keyof TrainConfig, unknown>>;
  /** nanoGPT's `dataset` name, whose data is in `data/<name>` unless a data dir is given. */
  datasetName?: string;
  /** One line per key read but ignored (wandb_*, compile, ...), for the job to print. */
  notes: string[];
  /** How the file spells each field it sets, for errors to name (`n_layer in c.py:3`). */
  keys: Map<string, string>;
}

/** A mapping that reads the value as it is, of one Python kind. */
type Kind = "int" | "float" | "str" | "bool";

/** nanoGPT's train.py names, each the job's field and the Python kind it holds. */
const FIELDS: Record<string, [keyof TrainConfig, Kind]> = {
  out_dir: ["outDir", "str"],
  eval_interval: ["evalInterval", "int"],
  log_interval: ["logInterval", "int"],
  eval_iters: ["evalIters", "int"],
  eval_only: ["evalOnly", "bool"],
  always_save_checkpoint: ["alwaysSaveCheckpoint", "bool"],
  init_from: ["initFrom", "str"],
  gradient_accumulation_steps: ["gradientAccumulationSteps", "int"],
  batch_size: ["batchSize", "int"],
  block_size: ["blockSize", "int"],
  n_layer: ["nLayer", "int"],
  n_head: ["nHead", "int"],
  n_embd: ["nEmbd", "int"],
  dropout: ["dropout", "float"],
  bias: ["bias", "bool"],
  learning_rate: ["lr", "float"],
  max_iters: ["maxIters", "int"],
  weight_decay: ["weightDecay", "float"],
  beta1: ["beta1", "float"],
  beta2: ["beta2", "float"],
  grad_clip: ["gradClip", "float"],
  decay_lr: ["decayLr", "bool"],
  warmup_iters: ["warmupIters", "int"],
  lr_decay_iters: ["lrDecayIters", "int"],
  min_lr: ["minLr", "float"],
};

/** Keys nanoGPT knows that the job reads and ignores, with why. */
/** nanoGPT's `dtype` values, as the job's `dtype` (float16 needs a GradScaler: refused). */
const NANOGPT_DTYPES: Readonly<Record<string, TrainConfig["dtype"]>> = Object.assign(
  Object.create(null),
  { float32: "f32", bfloat16: "bf16" },
);

const IGNORED: Record<string, string> = {
  wandb_log: "no wandb here: report.html beside the snapshot draws the curves",
  wandb_project: "no wandb here",
  wandb_run_name: "no wandb here",
  compile: "dtrain has no torch.compile",
  backend: "the job picks its process-group backend from --device",
};

const NUMBER =
  /^[+-]?(?:\d(?:_?\d)*(?:\.(?:\d(?:_?\d)*)?)?|\.\d(?:_?\d)*)(?:[eE][+-]?\d(?:_?\d)*)?$/;
const ESCAPES: Record<string, string> = {
  "\\": "\\",
  "'": "'",
  '"': '"',
  n: "\n",
  t: "\t",
  r: "\r",
  "0": "\0",
};

/** The literal at the start of `text` and what follows it, or a reason it is not one. */
function readLiteral(text: string): { value: PyLiteral; rest: string } | string {
  const mark = text[0];
  if (mark === "'" || mark === '"') {
    if (text.startsWith(mark.repeat(3))) return "triple-quoted strings are not read";
    let value = "";
    for (let i = 1; i < text.length; i++) {
      const c = text[i];
      if (c === mark) return { value, rest: text.slice(i + 1) };
      if (c === "\\") {
        const escaped = ESCAPES[text[++i]];
        if (escaped === undefined) return `the escape \\${printable(text[i] ?? "")} is not read`;
        value += escaped;
      } else value += c;
    }
    return "the string is not closed on its line";
  }
  const hash = text.indexOf("#");
  const token = (hash < 0 ? text : text.slice(0, hash)).trim();
  const rest = hash < 0 ? "" : text.slice(hash);
  if (token === "True" || token === "False") return { value: token === "True", rest };
  if (NUMBER.test(token)) {
    const value = Number(token.replaceAll("_", ""));
    // Python reads 1e400 as inf and a 400-digit int exactly; neither is a number the job can use.
    if (/[.eE]/.test(token) ? !Number.isFinite(value) : !Number.isSafeInteger(value)) {
      return `${quote(token)} is out of range (floats up to 1.8e308, ints up to 2**53 - 1)`;
    }
    return { value, rest };
  }
  return `${quote(token)} is not a literal (an int, a float, a string in ' or ", True or False)`;
}

/** The Python kind of a literal, as nanoGPT's configurator compares types. */
function kindOf(value: PyLiteral, raw: string): Kind {
  if (typeof value === "boolean") return "bool";
  if (typeof value === "string") return "str";
  return /[.eE]/.test(raw) ? "float" : "int";
}

/**
 * Reads the `key = literal` lines of a Python file, in order (a later one overrides an earlier).
 *
 * @param text The file's text.
 * @param where Names the file in messages.
 * @returns Each key's value, its Python kind and its line number (from 1).
 * @throws Error naming `where:line` and the line for anything but a literal assignment, a comment
 *   or a blank line.
 */
export function readPyAssignments(
  text: string,
  where: string,
): Map<string, { value: PyLiteral; kind: Kind; line: number }> {
  const assigned = new Map<string, { value: PyLiteral; kind: Kind; line: number }>();
  text.split(/\r?\n/).forEach((source, index) => {
    const line = index + 1;
    const trimmed = source.trim();
    if (trimmed === "" || trimmed.startsWith("#")) return;
    const fail = (why: string) => {
      throw new Error(`${where}:${line}: ${why}: ${printable(trimmed)}`);
    };
    const match = /^([A-Za-z_]\w*)\s*=(?!=)\s*(.*)$/.exec(trimmed);
    if (match === null || source !== source.trimStart()) {
      fail(
        "expected `key = literal` (only literal assignments, comments and blank lines are read)",
      );
      return;
    }
    const read = readLiteral(match[2]);
    if (typeof read === "string") return fail(read);
    if (read.rest.trim() !== "" && !read.rest.trim().startsWith("#")) {
      return fail(`unexpected ${quote(read.rest.trim())} after the value`);
    }
    const raw = match[2].slice(0, match[2].length - read.rest.length).trim();
    assigned.set(match[1], { value: read.value, kind: kindOf(read.value, raw), line });
  });
  return assigned;
}

/**
 * Reads a nanoGPT config file's text into the job's fields.
 *
 * @param text The file's text.
 * @param where Names the file in messages.
 * @throws Error naming `where:line` for a line that is not a literal assignment, an unknown key,
 *   or a value of the wrong kind (an int where nanoGPT has a bool, say).
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { parseNanoGptConfig } from "./nanogpt_config.ts";
 * const config = parseNanoGptConfig("n_layer = 6 # six\nlearning_rate = 1e-3\ncompile = False\n", "c.py");
 * assert.deepEqual(config.fields, { nLayer: 6, lr: 0.001 });
 * assert.equal(config.notes.length, 1);
 * ```
 */
export function parseNanoGptConfig(text: string, where: string): NanoGptConfig {
  const config: NanoGptConfig = { fields: {}, notes: [], keys: new Map() };
  for (const [key, { value, kind, line }] of readPyAssignments(text, where)) {
    const at = `${where}:${line}`;
    const spell = (field: keyof TrainConfig) => config.keys.set(field, `${key} in ${at}`);
    const wrong = (want: string) =>
      new Error(`${at}: ${key} must be ${want}, got ${kind} ${quote(value)}`);
    // Own keys only: `__proto__`, `constructor` or `toString` are no setting of nanoGPT's.
    if (Object.hasOwn(IGNORED, key)) {
      config.notes.push(`${at}: ${key} ignored (${IGNORED[key]})`);
    } else if (key === "dataset") {
      if (typeof value !== "string") throw wrong("a string");
      config.fields.dataset = "tokens";
      config.datasetName = value;
      spell("dataset");
      spell("dataDir");
    } else if (key === "device") {
      if (typeof value !== "string") throw wrong("a string");
      // nanoGPT's 'cuda:1' picks a GPU; here each rank takes its local rank's device of the family.
      const family = /^([a-z][a-z0-9_]*):\d+$/.exec(value)?.[1];
      config.fields.device = family ?? value;
      spell("device");
      if (family) config.notes.push(`${at}: device ${value} read as ${family}`);
    } else if (key === "dtype") {
      if (typeof value !== "string") throw wrong("a string");
      const dtype = NANOGPT_DTYPES[value];
      if (dtype === undefined) {
        throw new Error(
          `${at}: dtype ${quote(value)} is not supported (float32 or bfloat16; float16 ` +
            `trains with a GradScaler, which dtrain does not have)`,
        );
      }
      config.fields.dtype = dtype;
      spell("dtype");
    } else if (Object.hasOwn(FIELDS, key)) {
      const [field, want] = FIELDS[key];
      const fits = want === kind || (want === "float" && kind === "int");
      if (!fits) {
        throw wrong(want === "float" ? "a number" : `${want === "int" ? "an" : "a"} ${want}`);
      }
      config.fields[field] = value;
      spell(field);
      // nanoGPT's out_dir is where the snapshot goes.
      if (field === "outDir") spell("snapshot");
    } else {
      throw new Error(
        `${at}: unknown nanoGPT config key ${quote(key)} (known: ` +
          `${
            [...Object.keys(FIELDS), "dataset", "device", "dtype", ...Object.keys(IGNORED)]
              .join(", ")
          })`,
      );
    }
  }
  return config;
}
