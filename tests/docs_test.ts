/**
 * What `deno doc mod.ts` renders, which is what JSR shows: every namespace lists every member of
 * the module behind it (scripts/test.sh runs `deno doc --lint mod.ts` beside `deno lint`).
 * @module
 */

import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";

const root = new URL("../", import.meta.url);

interface DocSymbol {
  name: string;
  declarations: { kind: string; def: { elements?: DocSymbol[] } }[];
}

/** The top-level symbols `deno doc --json` finds in `file` (relative to the repository root). */
async function docSymbols(file: string): Promise<DocSymbol[]> {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["doc", "--json", file],
    cwd: fileURLToPath(root),
    stdout: "piped",
    stderr: "piped",
    signal: AbortSignal.timeout(60_000),
  }).output();
  assert.ok(
    out.success,
    `deno doc --json ${file} failed:\n${new TextDecoder().decode(out.stderr)}`,
  );
  const doc = JSON.parse(new TextDecoder().decode(out.stdout));
  return doc.nodes[new URL(file, root).href].symbols;
}

const namespaces: [string, string][] = [
  ["nn", "src/nn/mod.ts"],
  ["F", "src/nn/functional.ts"],
  ["optim", "src/optim/mod.ts"],
  ["data", "src/data/mod.ts"],
  ["checkpoint", "src/checkpoint/mod.ts"],
  ["dist", "src/distributed/mod.ts"],
  ["parallel", "src/parallel/mod.ts"],
];

Deno.test("deno doc mod.ts lists every member of every namespace", async () => {
  const top = await docSymbols("mod.ts");
  for (const [name, module] of namespaces) {
    const ns = top.find((s) => s.name === name);
    assert.ok(ns, `mod.ts does not export the namespace ${name}`);
    const listed = new Set(ns.declarations[0].def.elements?.map((e) => e.name));
    const missing = (await docSymbols(module)).map((s) => s.name).filter((n) => !listed.has(n));
    assert.deepEqual(missing, [], `deno doc shows no ${missing.join(", ")} in ${name} (${module})`);
  }
});
