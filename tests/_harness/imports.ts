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
 * Every import in `text`: static `import` / `export ... from` declarations (type-only ones and
 * side-effect imports too) and dynamic `import(...)`, whose argument must be a string literal to
 * be read.
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
      specifier: m[1] ?? null,
      line: lineOf(m.index),
      typeOnly: false,
      dynamic: true,
    })),
  ];
}
