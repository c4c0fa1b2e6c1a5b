// The device seam holds: outside src/tensor/device/, no file imports a device's own module (cpu.ts,
// cuda*.ts), type-only imports included, and none decides anything by a family's name. Everything
// above the seam goes through src/tensor/device/mod.ts and asks a device (`isHostMemory`) or its
// family's record (family.ts), so that a new family is its device file and its record, not a
// string added wherever one is compared.

import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { importsOf, typeScriptFiles } from "../_harness/imports.ts";
import { FAMILY_NAMES } from "../../src/tensor/device/mod.ts";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const SEAM = `${ROOT}src/tensor/device/`;

const aboveSeam = [
  ...typeScriptFiles(`${ROOT}src/`),
  ...typeScriptFiles(`${ROOT}bench/`),
  `${ROOT}mod.ts`,
]
  .filter((file) => !file.startsWith(SEAM));

/** The relative specifiers `file` imports or re-exports from, type-only and dynamic ones too. */
function specifiers(file: string): string[] {
  return importsOf(Deno.readTextFileSync(file)).flatMap(({ specifier }) =>
    specifier?.startsWith(".") ? [specifier] : []
  );
}

Deno.test("no file outside src/tensor/device/ imports a device's own module", () => {
  const offenders = aboveSeam.flatMap((file) =>
    specifiers(file)
      .map((specifier) => fileURLToPath(new URL(specifier, `file://${file}`)))
      .filter((target) => /^(cpu|cuda[a-z_]*|emu[a-z_]*)\.ts$/.test(target.slice(SEAM.length)))
      .filter((target) => target.startsWith(SEAM))
      .map((target) => `${file.slice(ROOT.length)} imports ${target.slice(ROOT.length)}`)
  );
  assert.ok(aboveSeam.length > 100, `only ${aboveSeam.length} files found above the seam`);
  assert.deepEqual(offenders, []);
});

/**
 * The ways a line decides by a family's name, from the names of family.ts: `NAMES` is the
 * alternation of every family's name, a literal is one quoted (`"cuda"`, `'cuda:0'`), a template
 * one starts a device name (`` `cuda:${i}` ``). Words in messages and comments are not decisions.
 */
function nameRules(names: readonly string[]): [rule: string, pattern: RegExp][] {
  const NAMES = `(?:${names.join("|")})`;
  const literal = `["'\`]${NAMES}(?::[^"'\`]*)?["'\`]`;
  const template = `\`${NAMES}:\\$\\{`;
  const either = `(?:${literal}|${template})`;
  return [
    ["compared", new RegExp(`[!=]==?\\s*${either}|${literal}\\s*[!=]==?`)],
    ["a case", new RegExp(`\\bcase\\s+${literal}`)],
    ["chosen", new RegExp(`\\?\\s*${either}\\s*:`)],
    [
      "matched",
      new RegExp(`\\.(?:startsWith|endsWith|includes|indexOf|match|test)\\(\\s*["'\`]${NAMES}\\b`),
    ],
    ["a pattern", new RegExp(`(?:^|[=(,:!&|?]\\s*)\\/\\^\\(?${NAMES}\\b`)],
    ["listed", new RegExp(`${either}[^,\\])]*,\\s*${either}|\\b${NAMES}\\|${NAMES}\\b`)],
  ];
}

/**
 * Whether `line` has a union type of family names (`"cpu" | "cuda"`, `"host" | "emu"`): every
 * quoted member beside a `|` a family's name (or "host", the memory of no family), so that a
 * union of backend names that shares one ("gloo" | ... | "emu") is not one.
 */
function familyUnion(line: string, names: readonly string[]): boolean {
  const members = [...line.matchAll(/["'`]([^"'`]*)["'`]\s*\||\|\s*["'`]([^"'`]*)["'`]/g)]
    .map((m) => (m[1] ?? m[2]).split(":")[0]);
  return members.some((m) => names.includes(m)) &&
    members.every((m) => names.includes(m) || m === "host");
}

/** The lines of `files` that decide by one of `names`, as "path:line [rule] text". */
function decisionsByName(files: string[], names: readonly string[]): string[] {
  const rules = nameRules(names);
  return files.flatMap((file) =>
    Deno.readTextFileSync(file).split("\n").flatMap((line, i) => {
      if (/^\s*(?:\*|\/\/|\/\*)/.test(line)) return [];
      const rule = rules.find(([, pattern]) => pattern.test(line))?.[0] ??
        (familyUnion(line, names) ? "a union" : null);
      return rule ? [`${file.slice(ROOT.length)}:${i + 1} [${rule}] ${line.trim()}`] : [];
    })
  );
}

Deno.test("no file outside src/tensor/device/ decides anything by a family's name", () => {
  assert.ok(FAMILY_NAMES.length >= 3, `family.ts names ${FAMILY_NAMES.length} families`);
  assert.deepEqual(decisionsByName(aboveSeam, FAMILY_NAMES), []);
});

Deno.test("the name check catches each way of deciding by a family's name", () => {
  const file = Deno.makeTempFileSync({ suffix: ".ts" });
  const decisions = [
    'if (choice === "cpu") return null;',
    'return t.device !== "cuda:0";',
    'case "emu":',
    'const device = options.device ?? (pinMemory ? "cuda:0" : "cpu");',
    'if (value.startsWith("cuda:")) notes.push(value);',
    "const family = /^cuda(:\\d+)?$/.test(value);",
    'const DEVICE_TYPES = ["cpu", "cuda", "emu"];',
    "const device = [`cuda:${local}`, `emu:${local}`].find(reaches);",
    "  --device cpu|cuda|emu    (default cpu)",
    'export type Memory = "host" | "cuda" | "emu";',
    'type Device = "cpu" | `cuda:${number}`;',
  ];
  const mentions = [
    'throw new Error(`device "cuda:${index}" is not available`);',
    'export type BackendKind = "gloo" | "shm" | "nccl" | "emu" | "auto";',
    'const device = options.device ?? "cpu";',
    'autocast({ deviceType: "cpu", dtype: "bf16" }, run);',
    '// if (device === "cuda") a comment may say so',
  ];
  try {
    Deno.writeTextFileSync(file, [...decisions, ...mentions].join("\n"));
    const found = decisionsByName([file], FAMILY_NAMES).map((hit) =>
      Number(/:(\d+) /.exec(hit)![1])
    );
    assert.deepEqual(found, decisions.map((_, i) => i + 1));
  } finally {
    Deno.removeSync(file);
  }
});

Deno.test("no file above the seam but mod.ts imports a family's namespace (cuda, emu)", () => {
  // mod.ts re-exports them for users (`cuda.isAvailable()`); dtrain's own layers ask the record.
  const NAMES = FAMILY_NAMES.join("|");
  const binding = new RegExp(
    String.raw`^(?:import|export)\s+\{[^}]*\b(?:${NAMES})\b(?!\s+as)[^}]*\}\s+from\s+` +
      String.raw`["'][^"']*device/mod\.ts["']`,
    "m",
  );
  const offenders = aboveSeam
    .filter((file) => file !== `${ROOT}mod.ts`)
    .filter((file) => binding.test(Deno.readTextFileSync(file)))
    .map((file) => file.slice(ROOT.length));
  assert.deepEqual(offenders, []);
});
