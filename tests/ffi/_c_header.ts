/**
 * Reads the function prototypes and enums of a C header (csrc/core/dtrain.h) and compares them
 * with a Deno FFI symbol table and its enum objects, for tests/ffi/abi_test.ts and enums_test.ts:
 * enough C for a header of plain prototypes, enums, typedefs and macros, not a C parser.
 * @module
 */

import assert from "node:assert/strict";

/** One prototype as the header declares it. */
export interface CFunction {
  name: string;
  /** The result's C type, e.g. `int`, `void *`. */
  result: string;
  /** Each parameter's C type without its name, e.g. `const float *`. */
  params: string[];
  /** Whether the list ends in `...`. */
  variadic: boolean;
  /** The banner (`/* ---- name * /`) the prototype sits under, e.g. `parallel.c (CPU only)`. */
  section: string;
}

/** An FFI entry, as far as the comparison reads it. */
export interface FfiEntry {
  parameters: readonly unknown[];
  result: unknown;
  /** The C function the entry calls, when its key is another name for it (Deno's `name`). */
  name?: string;
}

const BANNER = /\/\*\s*-{8,}\s*(.*?)\s*\*\//g;
const PROTOTYPE = /^(.*?)\b(dt_\w+)\s*\(([^()]*)\)\s*(?:__attribute__\s*\(\(.*\)\))?$/s;

/** The prototypes of `text`, in order. */
export function parseHeader(text: string): CFunction[] {
  const code = text
    .replace(BANNER, (_, name: string) => `@section ${name};`)
    .replace(/\/\*[\s\S]*?\*\//g, " ")
    .replace(/\/\/.*$/gm, " ")
    .replace(/^\s*#(?:.*\\\n)*.*$/gm, " ") // directives, with their continuation lines
    .replace(/extern\s+"C"\s*\{|^\s*\}\s*$/gm, " ")
    .replace(/\benum\b[^{;]*\{[^}]*\}\s*;/g, " ");
  const functions: CFunction[] = [];
  let section = "";
  for (const raw of code.split(";")) {
    const statement = raw.replace(/\s+/g, " ").trim();
    if (statement.startsWith("@section ")) {
      section = statement.slice("@section ".length);
      continue;
    }
    // Type declarations and C++'s `using` (the collective headers') declare no function.
    if (statement === "" || /^(?:typedef|using|struct \w+$)/.test(statement)) continue;
    const match = PROTOTYPE.exec(statement);
    if (!match) throw new SyntaxError(`not a prototype: ${statement}`);
    const list = match[3].trim();
    const params = list === "void" || list === "" ? [] : list.split(",").map((p) => p.trim());
    const variadic = params.at(-1) === "...";
    functions.push({
      name: match[2],
      result: normalise(match[1]),
      params: (variadic ? params.slice(0, -1) : params).map(typeOfParam),
      variadic,
      section,
    });
  }
  return functions;
}

/** `const float *a` -> `const float *`; `int32_t n` -> `int32_t`. */
function typeOfParam(param: string): string {
  const match = /^(.*?[\s*])\w+$/.exec(param);
  return normalise(match ? match[1] : param);
}

function normalise(type: string): string {
  return type.replace(/\s*\*\s*/g, " *").replace(/\s+/g, " ").trim();
}

/** The FFI types that carry each C scalar type. */
const SCALARS: Record<string, string[]> = {
  int: ["i32"],
  int32_t: ["i32"],
  uint32_t: ["u32"],
  int64_t: ["i64"],
  uint64_t: ["u64"],
  size_t: ["usize", "u64"],
  int8_t: ["i8"],
  uint8_t: ["u8"],
  int16_t: ["i16"],
  uint16_t: ["u16"],
  float: ["f32"],
  double: ["f64"],
  void: ["void"],
};

/** Whether FFI type `ffi` carries C type `c`: pointers (and callbacks) as "pointer", "buffer". */
export function fits(c: string, ffi: unknown): boolean {
  if (typeof ffi !== "string") return false; // structs: libdtrain passes none by value
  const bare = c.replace(/\bconst\b/g, "").trim();
  if (bare.includes("*") || /^dt_\w+_fn$/.test(bare)) {
    return ffi === "pointer" || ffi === "buffer" || ffi === "function";
  }
  return SCALARS[bare]?.includes(ffi) ?? false;
}

/**
 * Every disagreement between the header's prototypes and an FFI table, one line each: a table
 * entry the header does not declare, a declared function the table lacks, a different parameter
 * count, a parameter or result whose types do not fit. Functions that the FFI cannot call
 * (variadic, or taking a C callback) are not expected in the table.
 */
export function abiMismatches(
  header: CFunction[],
  table: Record<string, FfiEntry>,
  prefix = "dt_",
): string[] {
  const declared = new Map(header.map((f) => [f.name, f]));
  const problems: string[] = [];
  for (const [name, entry] of Object.entries(table)) {
    if (!name.startsWith(prefix)) continue;
    const f = declared.get(entry.name ?? name);
    if (!f) {
      problems.push(`${name}: in the FFI table, not declared in the header`);
      continue;
    }
    if (f.variadic) problems.push(`${name}: variadic in the header, not callable through the FFI`);
    if (entry.parameters.length !== f.params.length) {
      problems.push(
        `${name}: ${entry.parameters.length} parameters in the FFI table, ` +
          `${f.params.length} in the header (${f.params.join(", ") || "void"})`,
      );
    }
    f.params.forEach((c, i) => {
      if (i < entry.parameters.length && !fits(c, entry.parameters[i])) {
        problems.push(
          `${name}: parameter ${i + 1} is ${c} in the header, ` +
            `${JSON.stringify(entry.parameters[i])} in the FFI table`,
        );
      }
    });
    if (!fits(f.result, entry.result)) {
      problems.push(
        `${name}: returns ${f.result} in the header, ${
          JSON.stringify(entry.result)
        } in the FFI table`,
      );
    }
  }
  for (const f of header) {
    if (f.name in table || !callable(f)) continue;
    problems.push(`${f.name}: declared in the header, missing from the FFI table`);
  }
  return problems;
}

/** Whether the FFI can call `f`: no variadic list, no C callback parameter. */
export function callable(f: CFunction): boolean {
  return !f.variadic && !f.params.some((p) => /^dt_\w+_fn$/.test(p));
}

/** One enum of a header: its type's name and the text between its braces. */
export interface CEnum {
  /** `dt_status` of `enum dt_status { ... };` and of `typedef enum { ... } dt_status;`. */
  name: string;
  body: string;
}

const ENUM = /\b(typedef\s+)?enum\s*(\w+)?\s*\{([^}]*)\}\s*(\w+)?\s*;/g;

/** The named enums of `text`, in order (an anonymous `enum { ... };` names no type). */
export function parseEnums(text: string): CEnum[] {
  const code = text.replace(/\/\*[\s\S]*?\*\//g, " ").replace(/\/\/.*$/gm, " ");
  const enums: CEnum[] = [];
  for (const [, typedef, tag, body, alias] of code.matchAll(ENUM)) {
    const name = typedef ? alias : tag;
    if (name) enums.push({ name, body });
  }
  return enums;
}

/**
 * The members of enum `name` in `enums`, each `DT_NAME = number`, as `spell` turns `NAME` (the
 * member without its `DT_`) into the TypeScript key, with their values.
 * @throws AssertionError when no enum is called `name` or a member has another form.
 */
export function enumMembers(
  enums: CEnum[],
  name: string,
  spell: (member: string) => string,
): Record<string, number> {
  const found = enums.find((e) => e.name === name);
  if (!found) throw new assert.AssertionError({ message: `no header declares enum ${name}` });
  const members: Record<string, number> = {};
  for (const item of found.body.split(",").map((s) => s.trim()).filter(Boolean)) {
    const m = /^DT_(\w+)\s*=\s*(\d+)$/.exec(item);
    if (!m) {
      throw new assert.AssertionError({
        message: `enum ${name}: cannot read "${item}" (each member is DT_NAME = number)`,
      });
    }
    members[spell(m[1])] = Number(m[2]);
  }
  return members;
}
