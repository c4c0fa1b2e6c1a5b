/**
 * The train job's `--config` file: JSON with camelCase keys, or a nanoGPT config `.py` as it is.
 * @module
 */

import { printable } from "../io/printable.ts";
import { notRegularFile } from "../io/regular_file.ts";
import { ConfigError } from "./_schema.ts";
import { parseNanoGptConfig } from "./nanogpt_config.ts";

/** What a config file sets. */
export interface ConfigFile {
  /** The fields it sets (camelCase). */
  fields: Record<string, unknown>;
  /** nanoGPT's `dataset` name, whose data is in `data/<name>` unless a data dir is given. */
  datasetName?: string;
  /** How the file spells each field it sets, for errors to name. */
  keys: Map<string, string>;
}

/**
 * Reads the config file at `path` (absolute: its errors name it as tried).
 *
 * @param path The file, a JSON object or a nanoGPT config `.py`.
 * @param notes Collects a line for each nanoGPT setting read and ignored.
 * @throws ConfigError naming the file and what is wrong.
 */
export function readConfigFile(path: string, notes: string[]): ConfigFile {
  let text: string;
  try {
    // A FIFO would block the read; a directory's error names the path only in passing.
    const other = notRegularFile(path);
    if (other !== null) throw new Error(`it is ${other}, expected a JSON or nanoGPT .py file`);
    text = Deno.readTextFileSync(path);
  } catch (error) {
    throw new ConfigError("config", `cannot read ${path}: ${(error as Error).message}`);
  }
  if (path.endsWith(".py")) {
    try {
      const read = parseNanoGptConfig(text, path);
      notes.push(...read.notes);
      return read;
    } catch (error) {
      throw new ConfigError("config", (error as Error).message);
    }
  }
  let value: unknown;
  // JSON reads 1e400 as Infinity, which would reach the schema as a number "received number".
  // The reviver sees the innermost value first: the path grows outward as its holders come.
  let outOfRange: { path: string[]; holder: unknown; source: string } | undefined;
  function reviver(this: unknown, key: string, v: unknown, context?: { source?: string }) {
    if (outOfRange === undefined && typeof v === "number" && !Number.isFinite(v)) {
      outOfRange = { path: [key], holder: this, source: `${context?.source}` };
    } else if (outOfRange !== undefined && v === outOfRange.holder && key !== "") {
      outOfRange = { ...outOfRange, path: [key, ...outOfRange.path], holder: this };
    }
    return v;
  }
  try {
    value = JSON.parse(text, reviver);
  } catch (error) {
    // V8's message quotes the text around the error, which may be any bytes.
    const why = printable((error as Error).message);
    throw new ConfigError(
      "config",
      `${path} is not valid JSON: ${why} (a nanoGPT config file ends in .py)`,
    );
  }
  if (outOfRange !== undefined) {
    const key = outOfRange.path.filter((k) => k !== "").map(printable).join(".");
    throw new ConfigError(
      // Named as the file spells it, as every error of a field the file sets.
      key === "" ? "config" : `${key} in ${path}`,
      `${key === "" ? `${path}: ` : ""}${printable(outOfRange.source)} is out of range ` +
        `(numbers up to 1.8e308)`,
    );
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    throw new ConfigError("config", `${path} must hold a JSON object`);
  }
  const fields = value as Record<string, unknown>;
  return {
    fields,
    keys: new Map(Object.keys(fields).map((k) => [k, `${printable(k)} in ${path}`])),
  };
}
