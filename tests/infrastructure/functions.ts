// The Terraform functions the infrastructure tests evaluate (expression.ts), both in configurations
// and in templates: those our configurations call, each as Terraform defines it for the values we
// pass, anything else refused as UnsupportedError. `can()` and `try()` swallow only
// EvaluationError, Terraform's own errors.
import {
  asBool,
  asList,
  asNumber,
  asString,
  EvaluationError,
  type TerraformFunction,
  UnsupportedError,
  type Value,
} from "./expression.ts";

/** The functions both Terraform configurations and templates may call here. */
export const coreFunctions: Record<string, TerraformFunction> = {
  alltrue: strict((list) => asList(list).every((item) => asBool(item))),
  base64encode: strict((text) => {
    const bytes = new TextEncoder().encode(asString(text));
    let binary = "";
    for (const byte of bytes) binary += String.fromCharCode(byte);
    return btoa(binary);
  }),
  can: async ([arg]) => {
    try {
      await arg();
      return true;
    } catch (error) {
      if (!(error instanceof EvaluationError)) throw error;
      return false;
    }
  },
  contains: strict((list, value) => asList(list).some((item) => item === value)),
  file: strict((path) => {
    try {
      return Deno.readTextFileSync(asString(path));
    } catch (error) {
      throw new EvaluationError(`file(${JSON.stringify(path)}): ${error}`);
    }
  }),
  fileexists: strict((path) => {
    try {
      return Deno.statSync(asString(path)).isFile;
    } catch {
      return false;
    }
  }),
  floor: strict((number) => Math.floor(asNumber(number))),
  // Only the verbs our configurations use: %s, and %% for a literal percent sign.
  format: strict((spec, ...values) => {
    let next = 0;
    const text = asString(spec).replace(/%(.)/g, (all, verb: string) => {
      if (verb === "%") return "%";
      if (verb !== "s") throw new UnsupportedError(`format() verb ${all}`);
      if (next >= values.length) throw new EvaluationError(`format(${spec}): too few arguments`);
      return asString(values[next++]);
    });
    if (next < values.length) throw new EvaluationError(`format(${spec}): too many arguments`);
    return text;
  }),
  // Terraform's jsonencode is Go's encoding/json, which escapes <, > and & in strings.
  jsonencode: strict((value) =>
    JSON.stringify(value).replace(/[<>&]/g, (c) => `\\u00${c.charCodeAt(0).toString(16)}`)
  ),
  join: strict((separator, list) => asList(list).map(asString).join(asString(separator))),
  length: strict((value) => {
    if (typeof value === "string" || Array.isArray(value)) return value.length;
    if (value !== null && typeof value === "object") return Object.keys(value).length;
    throw new EvaluationError(`length() of ${JSON.stringify(value)}`);
  }),
  pathexpand: strict((path) => asString(path).replace(/^~(?=$|\/)/, Deno.env.get("HOME") ?? "~")),
  regex: strict((pattern, text) => {
    const match = new RegExp(asString(pattern)).exec(asString(text));
    if (match === null) throw new EvaluationError(`regex ${pattern} does not match ${text}`);
    if (match.groups) throw new UnsupportedError("regex() with named groups");
    return match.length === 1 ? match[0] : match.slice(1).map((group) => group ?? null);
  }),
  replace: strict((text, search, replacement) => {
    // A search string in slashes is a regular expression in Terraform; ours are plain.
    if (/^\/.*\/$/.test(asString(search))) throw new UnsupportedError(`replace() with ${search}`);
    const by = asString(replacement); // a function: a string would expand $& and $'
    return asString(text).replaceAll(asString(search), () => by);
  }),
  split: strict((separator, text) => asString(text).split(asString(separator))),
  startswith: strict((text, prefix) => asString(text).startsWith(asString(prefix))),
  tonumber: strict((value) => {
    const number = typeof value === "number" ? value : Number(asString(value));
    if (Number.isNaN(number) || value === "") throw new EvaluationError(`tonumber(${value})`);
    return number;
  }),
  trimspace: strict((text) => asString(text).trim()),
  try: async (args) => {
    for (const arg of args) {
      try {
        return await arg();
      } catch (error) {
        if (!(error instanceof EvaluationError)) throw error;
      }
    }
    throw new EvaluationError("try(): no argument evaluated without errors");
  },
};

/** Wraps a function whose arguments are all evaluated before the call. */
export function strict(fn: (...values: Value[]) => Value): TerraformFunction {
  return async (args) => fn(...await Promise.all(args.map((arg) => arg())));
}
