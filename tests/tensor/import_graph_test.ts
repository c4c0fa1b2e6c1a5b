// The files of src/tensor import one another without a circle (type-only imports aside): a
// circle makes what a module sees at load time depend on which file was imported first, so the
// tensor, its ops, autograd and the device seam each stand on the ones below them.

import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { importsOf, typeScriptFiles } from "../_harness/imports.ts";

const ROOT = fileURLToPath(new URL("../../src/tensor/", import.meta.url));

/**
 * The files under `root` that `path` loads at run time: its static `import` and `export ... from`
 * declarations, without `import type` and `export type` (erased when compiled).
 */
function runtimeImports(path: string, root: string): string[] {
  return importsOf(Deno.readTextFileSync(path))
    .filter(({ specifier, typeOnly, dynamic }) =>
      !typeOnly && !dynamic && specifier !== null && specifier.startsWith(".")
    )
    .map(({ specifier }) => fileURLToPath(new URL(specifier!, `file://${path}`)))
    .filter((target) => target.startsWith(root));
}

/** The circles of the graph, one per back edge a depth-first walk finds, as file lists. */
function circles(graph: Map<string, string[]>): string[][] {
  const found: string[][] = [];
  const state = new Map<string, "open" | "done">();
  const stack: string[] = [];
  const visit = (file: string) => {
    state.set(file, "open");
    stack.push(file);
    for (const next of graph.get(file) ?? []) {
      if (state.get(next) === "open") found.push([...stack.slice(stack.indexOf(next)), next]);
      else if (state.get(next) === undefined) visit(next);
    }
    stack.pop();
    state.set(file, "done");
  };
  for (const file of graph.keys()) if (state.get(file) === undefined) visit(file);
  return found;
}

Deno.test("src/tensor has no runtime import circle", () => {
  const files = typeScriptFiles(ROOT);
  assert.ok(files.length > 30, `found only ${files.length} files under ${ROOT}`);
  const graph = new Map(files.map((file) => [file, runtimeImports(file, ROOT)]));
  const edges = [...graph.values()].reduce((n, targets) => n + targets.length, 0);
  assert.ok(edges > 50, `found only ${edges} imports: the pattern no longer reads them`);
  const named = circles(graph).map((circle) =>
    circle.map((file) => file.slice(ROOT.length)).join(" -> ")
  );
  assert.deepEqual(named, []);
});

Deno.test("the import reader sees runtime imports and skips type-only ones", () => {
  const dir = `${Deno.makeTempDirSync()}/`;
  try {
    const path = `${dir}sample.ts`;
    Deno.writeTextFileSync(
      path,
      [
        'import { a } from "./a.ts";',
        'import type { B } from "./b.ts";',
        'import {\n  c,\n  type C,\n} from "./c.ts";',
        'export { d } from "./d.ts";',
        'export type { E } from "./e.ts";',
        'import * as f from "./f.ts";',
        'import "./g.ts";',
        'import { h } from "../h.ts";',
        'import { assert } from "jsr:@std/assert";',
      ].join("\n"),
    );
    const seen = runtimeImports(path, dir).map((target) => target.slice(dir.length));
    assert.deepEqual(seen, ["a.ts", "c.ts", "d.ts", "f.ts", "g.ts"]);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});
