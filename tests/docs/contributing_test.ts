/**
 * docs/contributing.md's checklists cannot name a file that is not there: every file or folder
 * a numbered step names exists, read from the page as it is when the test runs. A path is
 * root-relative; a bare file name or a `../` path is found from the step's first folder upwards
 * (`main.tf` in `infrastructure/CLOUD/cluster/`, `mod.ts` from `src/tensor/ops/`); a placeholder
 * in capitals (CLOUD, NAME, FAMILY) or a `*` stands for any name, and at least one file must fit.
 * @module
 */

import assert from "node:assert/strict";
import { dirname, join, normalize } from "node:path";
import { ROOT } from "../_harness/processes.ts";

const CONTRIBUTING = "docs/contributing.md";

/** Folders no checklist points into: build output, tools and caches. */
const SKIPPED = new Set([
  ".git",
  "build",
  ".tools",
  "node_modules",
  "runs",
  ".torchenv",
  ".device",
]);

/** A numbered step of a checklist: its section and its text, continuation lines joined. */
interface Step {
  section: string;
  text: string;
}

/** The numbered steps of `markdown`, outside code blocks. */
function checklistSteps(markdown: string): Step[] {
  const steps: Step[] = [];
  let section = "";
  let current: Step | null = null;
  let fenced = false;
  for (const line of markdown.split("\n")) {
    if (line.startsWith("```")) fenced = !fenced;
    if (fenced) continue;
    if (line.startsWith("## ")) section = line.slice(3);
    const start = /^\d+\. (.*)$/.exec(line);
    if (start) steps.push(current = { section, text: start[1] });
    else if (current !== null && /^ {3}\S/.test(line)) current.text += ` ${line.trim()}`;
    else current = null;
  }
  return steps;
}

/** A bare file name as the checklists write one (`main.tf`, `Makefile`, `runtime_*.cc`). */
const FILE_NAME =
  /^(Makefile|[\w*-]+(\.[\w-]+)*\.(ts|tf|c|cc|cu|cuh|h|json|md|py|sh|example|tftpl|yaml))$/;

/** The code spans of `text` that name a file or folder. */
function namedPaths(text: string): string[] {
  return [...text.matchAll(/`([^`]+)`/g)].map((m) => m[1])
    .filter((span) => /^[\w.*/-]+$/.test(span) && (span.includes("/") || FILE_NAME.test(span)));
}

/** Every file and folder (with a trailing `/`) under the root, relative to it. */
function treeEntries(): string[] {
  const entries: string[] = [];
  const walk = (dir: string) => {
    for (const entry of Deno.readDirSync(join(ROOT, dir))) {
      if (SKIPPED.has(entry.name)) continue;
      const path = dir === "" ? entry.name : `${dir}/${entry.name}`;
      if (entry.isDirectory) {
        entries.push(`${path}/`);
        walk(path);
      } else entries.push(path);
    }
  };
  walk("");
  return entries;
}

/** A name in capitals that stands for any name (CLOUD, NAME, FAMILY), or a `*`. */
const PLACEHOLDER = /\*|\b[A-Z][A-Z_]*[A-Z]\b/;

/** Whether `path` (root-relative) is in `tree`, a placeholder or `*` standing for any name. */
function exists(path: string, tree: string[]): boolean {
  try {
    Deno.statSync(join(ROOT, path));
    return true;
  } catch {
    if (!PLACEHOLDER.test(path)) return false;
    const pattern = path.replace(/[.+?^${}()|[\]\\]/g, "\\$&")
      .replace(/\b[A-Z][A-Z_]*[A-Z]\b/g, "[^/]+").replace(/\*/g, "[^/]*");
    const fits = new RegExp(`^${pattern}$`);
    return tree.some((entry) => fits.test(entry));
  }
}

/** Where a step's bare names and `../` paths are looked for: its first folder, then each above. */
function searchFolders(step: Step): string[] {
  const first = namedPaths(step.text).find((p) => p.includes("/") && !p.startsWith("."));
  let folder = first === undefined ? "." : first.endsWith("/") ? first : dirname(first);
  const folders = [folder];
  while (folder !== ".") folders.push(folder = dirname(folder));
  return folders;
}

/** Each path the steps of `markdown` name that is not in the tree, as "section: path". */
function missingPaths(markdown: string, tree: string[]): string[] {
  const missing: string[] = [];
  for (const step of checklistSteps(markdown)) {
    const folders = searchFolders(step);
    for (const path of namedPaths(step.text)) {
      const relativeToStep = !path.includes("/") || path.startsWith(".");
      const candidates = relativeToStep
        ? folders.map((folder) => normalize(join(folder, path)))
        : [path];
      if (!candidates.some((candidate) => exists(candidate, tree))) {
        missing.push(`${step.section}: ${path}`);
      }
    }
  }
  return missing;
}

const tree = treeEntries();

Deno.test("every file and folder a step of docs/contributing.md names exists", () => {
  const markdown = Deno.readTextFileSync(join(ROOT, CONTRIBUTING));
  const steps = checklistSteps(markdown);
  // Each checklist is read, and names files: a parser that found none would pass vacuously.
  const sections = new Set(steps.map((step) => step.section));
  for (const title of ["Adding a kernel", "Adding a device", "Adding a cloud"]) {
    assert.ok([...sections].some((s) => s.startsWith(title)), `no steps read under "${title}"`);
  }
  for (const step of steps) {
    assert.ok(namedPaths(step.text).length > 0, `a step names no file: ${step.text}`);
  }
  assert.deepEqual(missingPaths(markdown, tree), []);
});

Deno.test("the checklist check names a missing path, a missing linked file and a placeholder nothing fits", () => {
  const markdown = [
    "## Adding a thing",
    "",
    "1. `src/tensor/no_such_file.ts`: never written, beside `mod.ts` (found above) and",
    "   `tensor_math.ts` (found in `src/tensor/`).",
    "2. `infrastructure/CLOUD/cluster/`: `main.tf` and links to `../../common/job.tf` and",
    "   `../../common/no_such.tf`.",
    "3. `csrc/core/FAMILY.zz` and `csrc/core/FAMILY.c`, then `nothing_*.cc` in the `Makefile`.",
    "",
    "```text",
    "1. `inside/a/code/block.ts` is not a step",
    "```",
  ].join("\n");
  assert.deepEqual(missingPaths(markdown, tree), [
    "Adding a thing: src/tensor/no_such_file.ts",
    "Adding a thing: ../../common/no_such.tf",
    "Adding a thing: csrc/core/FAMILY.zz",
    "Adding a thing: nothing_*.cc",
  ]);
});
