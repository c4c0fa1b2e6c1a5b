/**
 * Reading a tree's TypeScript files and the imports each makes, for the tests that hold the
 * architecture (tests/architecture/folder_dag_test.ts, tests/tensor/import_graph_test.ts,
 * tests/tensor/device_seam_test.ts): one reader, so that a kind of import none of them sees is
 * fixed once.
 * @module
 */

/** Every .ts file under `dir` (a path ending in "/"), depth first. */
export function typeScriptFiles(dir: string): string[] {
  return [...Deno.readDirSync(dir)].flatMap((entry) => {
    const path = `${dir}${entry.name}`;
    if (entry.isDirectory) return typeScriptFiles(`${path}/`);
    return entry.name.endsWith(".ts") ? [path] : [];
  });
}

/** One import of a file. */
export interface Import {
  /** The specifier as written, or null for a dynamic import of no string literal. */
  specifier: string | null;
  /** Its line, from 1. */
  line: number;
  /** `import type` / `export type` (erased when compiled: loads nothing at run time). */
  typeOnly: boolean;
  /** `import(...)`, evaluated when reached rather than when the file loads. */
  dynamic: boolean;
}

/**
 * What a computed `import(...)` at `index` loads, as the line above it declares it
 * (`// import target: npm:js-tiktoken`), or null when it does not say: a computed specifier is
 * read only where its file names what it builds. A module that running code names, not this
 * tree (the crash tests' hooks in a checkpoint writer), is declared `caller:FUNCTION`, after the
 * function through which it is named; like a package, it is no file of the tree to follow.
 */
function declaredTarget(text: string, index: number): string | null {
  const lineStart = text.lastIndexOf("\n", index) + 1;
  const above = text.slice(text.lastIndexOf("\n", lineStart - 2) + 1, lineStart);
  return /^\s*\/\/ import target: (\S+)\s*$/.exec(above)?.[1] ?? null;
}

/**
 * Every import in `text`: static `import` / `export ... from` declarations (type-only ones and
 * side-effect imports too) and dynamic `import(...)`, whose argument is read when it is a string
 * literal, or when the line above declares what a computed one loads.
 */
export function importsOf(text: string): Import[] {
  const clause = String
    .raw`(type\s+)?(?:[\w$]+\s*,\s*)?(?:[\w$]+|\*(?:\s+as\s+[\w$]+)?|\{[^}]*\})`;
  const declaration = new RegExp(
    String.raw`^(?:(?:import|export)\s+${clause}\s+from\s+|import\s+)["']([^"']+)["']`,
    "gm",
  );
  const dynamic = /\bimport\(\s*(?:["']([^"']+)["']\s*[,)])?/g;
  const lineOf = (index: number) => text.slice(0, index).split("\n").length;
  return [
    ...[...text.matchAll(declaration)].map((m) => ({
      specifier: m[2],
      line: lineOf(m.index),
      typeOnly: m[1] !== undefined,
      dynamic: false,
    })),
    ...[...text.matchAll(dynamic)].map((m) => ({
      specifier: m[1] ?? declaredTarget(text, m.index),
      line: lineOf(m.index),
      typeOnly: false,
      dynamic: true,
    })),
  ];
}
