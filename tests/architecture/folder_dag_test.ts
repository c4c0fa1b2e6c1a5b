// The folders of src/ are layers: a file imports its own folder and the folders of lower layers,
// never a peer's or a higher one's, so the folders form a DAG and each concept can be read, tested
// and loaded with only the ones beneath it. Type-only imports count: they are dependencies a
// reader follows all the same. Outside src/, only ffi/ (the symbol tables under every layer) is
// reachable. docs/contributing.md ("The layers") states the same order in one line.

import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { importsOf, typeScriptFiles } from "../_harness/imports.ts";

/**
 * The layers, lowest first; the folders of one row are peers and do not import each other. The
 * one place a folder's name is written: renaming a folder is a change to its row.
 */
const LAYERS: readonly (readonly string[])[] = [
  ["tensor", "io"], // tensors, autograd and the device seam; files, atomic writes, printable names
  ["safetensors", "profile"], // the tensor file format; the tracer and its timelines
  ["distributed"], // process groups, collectives, the store
  ["data", "optim"], // datasets and loaders; optimizers over tensors and their schedules
  ["nn"], // modules, GPT (whose configureOptimizers builds an AdamW)
  ["parallel"], // DDP, FSDP, tensor and pipeline parallelism over nn's modules
  ["checkpoint"], // state dicts of (sharded) models and optimizers
  ["launch", "prepare"], // the launcher and its supervisor; the dataset preparation CLI
  ["train"], // the training job
];

const REPO = fileURLToPath(new URL("../../", import.meta.url));
const SRC = `${REPO}src/`;
const FFI = `${REPO}ffi/`;

/** The layer of each folder named in LAYERS. */
const layerOf = new Map(LAYERS.flatMap((row, layer) => row.map((folder) => [folder, layer])));

/** The folder of src/ that holds `path` (a file directly in src/ has the folder ""). */
function folderOf(path: string): string {
  const rest = path.slice(SRC.length);
  return rest.includes("/") ? rest.slice(0, rest.indexOf("/")) : "";
}

/** An import between two folders of src/, as found in `file` at `line`. */
interface Edge {
  from: string;
  to: string;
  at: string;
}

/**
 * The folder-level imports of `files`, and the imports no layer allows: out of src/ elsewhere
 * than ffi/, dynamic ones of no literal, and files in a folder LAYERS does not name.
 */
function readGraph(files: string[]): { edges: Edge[]; unreadable: string[] } {
  const edges: Edge[] = [], unreadable: string[] = [];
  for (const file of files) {
    const from = folderOf(file);
    const name = file.slice(REPO.length);
    if (!layerOf.has(from)) unreadable.push(`${name} is in no folder of LAYERS`);
    for (const { specifier, line } of importsOf(Deno.readTextFileSync(file))) {
      const at = `${name}:${line}`;
      if (specifier === null) {
        unreadable.push(`${at} imports a computed specifier, which no reader can check`);
        continue;
      }
      if (!specifier.startsWith(".")) continue; // a package (zod, node:..., npm:...), not a file here
      const target = fileURLToPath(new URL(specifier, `file://${file}`));
      if (!target.startsWith(SRC)) {
        if (!target.startsWith(FFI)) {
          unreadable.push(`${at} imports ${specifier}, outside src/ and ffi/`);
        }
        continue;
      }
      const to = folderOf(target);
      if (to !== from) edges.push({ from, to, at: `${at} imports ${specifier}` });
    }
  }
  return { edges, unreadable };
}

/** A chain of folders from `start` to `goal` along `edges`, or null when `goal` is unreachable. */
function pathBetween(edges: Edge[], start: string, goal: string): string[] | null {
  const cameFrom = new Map<string, string>([[start, start]]);
  const queue = [start];
  while (queue.length > 0) {
    const folder = queue.shift()!;
    if (folder === goal) {
      const chain = [goal];
      while (chain[0] !== start) chain.unshift(cameFrom.get(chain[0])!);
      return chain;
    }
    for (const edge of edges) {
      if (edge.from === folder && !cameFrom.has(edge.to)) {
        cameFrom.set(edge.to, folder);
        queue.push(edge.to);
      }
    }
  }
  return null;
}

/**
 * The imports that go against LAYERS, each naming the file, the import, the two layers, and the
 * folder cycle it closes if it closes one.
 */
function againstLayers(edges: Edge[]): string[] {
  return edges
    .filter(({ from, to }) => layerOf.has(from) && !(layerOf.get(to)! < layerOf.get(from)!))
    .map(({ from, to, at }) => {
      const why = layerOf.get(to) === layerOf.get(from)
        ? `${from} and ${to} are peers`
        : layerOf.has(to)
        ? `${from} is below ${to}`
        : `${to} is in no row of LAYERS`;
      const back = pathBetween(edges, to, from);
      return `${at}: ${why}${back ? ` (a folder cycle: ${[from, ...back].join(" -> ")})` : ""}`;
    });
}

Deno.test("every folder of src/ has one layer, and every folder LAYERS names exists", () => {
  const folders = [...Deno.readDirSync(SRC)].filter((e) => e.isDirectory).map((e) => e.name);
  const named = LAYERS.flat();
  assert.deepEqual(named.filter((folder, i) => named.indexOf(folder) !== i), [], "named twice");
  assert.deepEqual(folders.filter((folder) => !layerOf.has(folder)).sort(), [], "not in LAYERS");
  assert.deepEqual(named.filter((folder) => !folders.includes(folder)), [], "not in src/");
});

Deno.test("the folders of src/ import only the layers beneath them", () => {
  const files = typeScriptFiles(SRC);
  assert.ok(files.length > 200, `found only ${files.length} files under ${SRC}`);
  const { edges, unreadable } = readGraph(files);
  assert.ok(edges.length > 300, `found only ${edges.length} imports between folders`);
  assert.deepEqual(unreadable, []);
  assert.deepEqual(againstLayers(edges), []);
});

Deno.test("the import reader sees every kind of import, type-only and dynamic ones too", () => {
  const text = [
    'import { a } from "./a.ts";',
    'import type { B } from "./b.ts";',
    'import {\n  c,\n  type C,\n} from "./c.ts";',
    'export { d } from "./d.ts";',
    'export type { E } from "./e.ts";',
    'import * as f from "./f.ts";',
    'import "./g.ts";',
    'export * from "../h.ts";',
    'import i, { j } from "./i.ts";',
    'const k = await import("./k.ts");',
    "const l = await import(name);",
    'import { assert } from "jsr:@std/assert";',
    'export const m = "from ./m.ts";',
    ' * import { n } from "./n.ts"; (a doc example: it imports mod.ts, not the file\'s folder)',
    "  // import target: npm:o@1/p",
    "  const o = await import([O, p].join());",
  ].join("\n");
  const read = importsOf(text).map(({ specifier, line, typeOnly, dynamic }) =>
    `${specifier} ${line}${typeOnly ? " type" : ""}${dynamic ? " dynamic" : ""}`
  );
  assert.deepEqual(read, [
    "./a.ts 1",
    "./b.ts 2 type",
    "./c.ts 3",
    "./d.ts 7",
    "./e.ts 8 type",
    "./f.ts 9",
    "./g.ts 10",
    "../h.ts 11",
    "./i.ts 12",
    "jsr:@std/assert 15",
    "./k.ts 13 dynamic",
    "null 14 dynamic",
    "npm:o@1/p 19 dynamic",
  ]);
});

Deno.test("an import up the layers, or between peers, is named with the cycle it closes", () => {
  const edge = (from: string, to: string) => ({ from, to, at: `src/${from}/x.ts:1 imports ${to}` });
  const [bottom, peer] = LAYERS[0], [above] = LAYERS[1];
  assert.deepEqual(againstLayers([edge(above, bottom), edge(bottom, peer)]), [
    `src/${bottom}/x.ts:1 imports ${peer}: ${bottom} and ${peer} are peers`,
  ]);
  assert.deepEqual(againstLayers([edge(above, bottom), edge(bottom, above)]), [
    `src/${bottom}/x.ts:1 imports ${above}: ${bottom} is below ${above} (a folder cycle: ${bottom} -> ${above} -> ${bottom})`,
  ]);
});
