/**
 * The guide (docs/guide/) cannot rot: every example program in docs/guide/examples/ runs, as the
 * command in its `// run:` line, under a hard timeout that kills every process it started, and
 * prints each of its `// expect:` lines; every code block a chapter embeds is byte for byte its
 * example file; every figure's caption names the script that made it; the examples and figure
 * scripts type-check; and every relative link in docs/ and README.md (anchors included) resolves. The conventions are in docs/guide/README.md.
 * @module
 */

import assert from "node:assert/strict";
import { dirname, join, relative } from "node:path";
import { describe as describeProcs, ROOT, runDeno } from "../_harness/processes.ts";

/** The files in `dir` (relative to the repository root) whose names match `pattern`, sorted. */
function filesIn(dir: string, pattern: RegExp): string[] {
  return [...Deno.readDirSync(join(ROOT, dir))]
    .filter((e) => e.isFile && pattern.test(e.name))
    .map((e) => `${dir}/${e.name}`)
    .sort();
}

/** Every Markdown file under docs/ (recursively), relative to the root, and README.md. */
function markdownFiles(): string[] {
  const out = ["README.md"];
  const walk = (dir: string) => {
    for (const e of Deno.readDirSync(join(ROOT, dir))) {
      if (e.isDirectory) walk(`${dir}/${e.name}`);
      else if (e.name.endsWith(".md")) out.push(`${dir}/${e.name}`);
    }
  };
  walk("docs");
  return out.sort();
}

const chapters = filesIn("docs/guide", /^\d\d-[a-z0-9-]+\.md$/);
const examples = filesIn("docs/guide/examples", /\.ts$/);

/** One run of an example: a `// run:` line and the `// expect:` lines under it. */
interface ExampleRun {
  command: string;
  /** Environment assignments written before the command (`DTRAIN_SHM=0 deno ...`). */
  env: Record<string, string>;
  /** `deno task launch ...` runs as a task; `deno run -A --v8-flags=--expose-gc ...` directly. */
  task: boolean;
  args: string[];
  expect: string[];
  expectMatch: RegExp[];
  exit: number;
  timeoutMs: number;
}

const RUN_PREFIX = "deno run -A --v8-flags=--expose-gc ";
const TASK_PREFIX = "deno task launch ";
const ASSIGNMENT = /^([A-Z_][A-Z0-9_]*)=(\S*) /;

/** The runs the header of `file` (relative to the root) asks for, in order. */
function parseExample(file: string): ExampleRun[] {
  const runs: ExampleRun[] = [];
  const lines = Deno.readTextFileSync(join(ROOT, file)).split("\n");
  for (const [i, line] of lines.entries()) {
    const m = /^\/\/ ([a-z-]+): (.*)$/.exec(line);
    if (!m) break; // the header is the leading comment lines
    const [, key, value] = m;
    const where = `${file}:${i + 1}`;
    if (key === "run") {
      runs.push(parseRun(file, where, value));
      continue;
    }
    const run = runs.at(-1);
    if (!run) throw new Error(`${where}: "// ${key}:" before the first "// run:" line`);
    if (key === "expect") run.expect.push(value);
    else if (key === "expect-match") run.expectMatch.push(new RegExp(value));
    else if (key === "exit") run.exit = Number(value);
    else if (key === "timeout") run.timeoutMs = Number(value) * 1000;
    else throw new Error(`${where}: unknown header line "// ${key}:" (see docs/guide/README.md)`);
    assert.ok(Number.isInteger(run.exit), `${where}: "// exit:" is not an integer`);
    assert.ok(run.timeoutMs > 0 && run.timeoutMs <= 60_000, `${where}: "// timeout:" not in 1..60`);
  }
  assert.ok(
    runs.length > 0,
    `${file} has no "// run:" line on its first line (docs/guide/README.md)`,
  );
  for (const run of runs) {
    assert.ok(
      run.expect.length + run.expectMatch.length > 0,
      `${file}: "// run: ${run.command}" has no "// expect:" line under it`,
    );
  }
  return runs;
}

/** One `// run:` line: optional `VAR=value` assignments, then the launcher or `deno run`. */
function parseRun(file: string, where: string, command: string): ExampleRun {
  const run: ExampleRun = {
    command,
    env: {},
    task: false,
    args: [],
    expect: [],
    expectMatch: [],
    exit: 0,
    timeoutMs: 30_000,
  };
  let rest = command;
  for (let a = ASSIGNMENT.exec(rest); a; a = ASSIGNMENT.exec(rest)) {
    run.env[a[1]] = a[2];
    rest = rest.slice(a[0].length);
  }
  if (rest.startsWith(TASK_PREFIX)) {
    run.task = true;
    run.args = ["launch", ...rest.slice(TASK_PREFIX.length).split(/ +/)];
  } else if (rest.startsWith(RUN_PREFIX)) {
    run.args = rest.slice(RUN_PREFIX.length).split(/ +/);
  } else {
    throw new Error(`${where}: a run line starts "${TASK_PREFIX}" or "${RUN_PREFIX}": ${command}`);
  }
  assert.ok(run.args.includes(file), `${where}: its run line does not run ${file}: ${command}`);
  return run;
}

/** A code block a chapter embeds: `<!-- example: examples/NN_name.ts -->` above a fence. */
interface Embedded {
  chapter: string;
  file: string;
  body: string;
}

const EMBED = /^<!-- example: (\S+) -->$/;

/** The fenced blocks of `chapter`, each with the example it embeds (if its marker says one). */
function fencedBlocks(chapter: string): { lang: string; body: string; embeds?: string }[] {
  const lines = Deno.readTextFileSync(join(ROOT, chapter)).split("\n");
  const blocks: { lang: string; body: string; embeds?: string }[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(\S*)/.exec(lines[i]);
    if (!open) continue;
    const end = lines.indexOf("```", i + 1);
    assert.ok(end > i, `${chapter}:${i + 1}: a code block that never closes`);
    let above = i - 1; // deno fmt puts a blank line between the marker and the fence
    while (above > 0 && lines[above] === "") above--;
    const marker = above >= 0 ? EMBED.exec(lines[above]) : null;
    blocks.push({
      lang: open[1],
      body: lines.slice(i + 1, end).join("\n") + "\n",
      embeds: marker ? join(dirname(chapter), marker[1]) : undefined,
    });
    i = end;
  }
  return blocks;
}

Deno.test("every chapter's TypeScript blocks are example files, byte for byte", () => {
  assert.ok(chapters.length > 0, "no chapter in docs/guide/");
  const embedded: Embedded[] = [];
  for (const chapter of chapters) {
    for (const block of fencedBlocks(chapter)) {
      if (block.embeds === undefined) {
        assert.ok(
          !/^(ts|typescript|js)$/.test(block.lang),
          `${chapter}: a ${block.lang} block with no "<!-- example: examples/FILE.ts -->" ` +
            `line above it (code in the guide lives in docs/guide/examples/, where CI runs it)`,
        );
        continue;
      }
      let text: string;
      try {
        text = Deno.readTextFileSync(join(ROOT, block.embeds));
      } catch {
        throw new Error(`${chapter} embeds ${block.embeds}, which does not exist`);
      }
      assert.equal(
        block.body,
        text,
        `${chapter}: its block of ${block.embeds} differs from the file`,
      );
      embedded.push({ chapter, file: block.embeds, body: block.body });
    }
  }
  const shown = new Set(embedded.map((e) => e.file));
  const unshown = examples.filter((f) => !shown.has(f));
  assert.deepEqual(unshown, [], `examples no chapter embeds: ${unshown.join(", ")}`);
});

Deno.test("every figure in a chapter names the script that made it, which exists", () => {
  const missing: string[] = [];
  for (const chapter of chapters) {
    const text = Deno.readTextFileSync(join(ROOT, chapter));
    for (const image of text.matchAll(/!\[[^\]]*\]\(([^)]+)\)/g)) {
      // The caption: what follows the image up to the next heading.
      const after = text.slice(image.index! + image[0].length);
      const section = after.slice(0, after.search(/^#/m) >>> 0);
      const scripts = [...section.matchAll(/\b((?:docs\/guide\/figures|bench)\/[\w.-]+\.ts)\b/g)]
        .map((m) => m[1]);
      const real = scripts.filter((f) => {
        try {
          return Deno.statSync(join(ROOT, f)).isFile;
        } catch {
          return false;
        }
      });
      if (real.length === 0) {
        missing.push(`${chapter}: ${image[1]} (${scripts.join(", ") || "no script named"})`);
      }
    }
  }
  assert.deepEqual(
    missing,
    [],
    `figures whose caption names no existing script:\n${missing.join("\n")}`,
  );
});

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens. */
function slug(heading: string): string {
  return heading
    .replace(/`/g, "")
    .replace(/\[([^\]]*)\]\([^)]*\)/g, "$1")
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, "")
    .replace(/\s/g, "-");
}

/** The anchors of a Markdown file's headings (duplicates numbered as GitHub does). */
function anchors(file: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  let inFence = false;
  for (const line of Deno.readTextFileSync(file).split("\n")) {
    if (line.startsWith("```")) inFence = !inFence;
    const h = inFence ? null : /^#{1,6} (.*)$/.exec(line);
    if (!h) continue;
    const base = slug(h[1].trim());
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

/** The link targets of a Markdown file, outside code blocks and inline code. */
function linkTargets(file: string): string[] {
  const text = Deno.readTextFileSync(join(ROOT, file))
    .replace(/^```[\s\S]*?^```/gm, "")
    .replace(/`[^`\n]*`/g, "");
  return [...text.matchAll(/\]\(([^)\s]+)(?: "[^"]*")?\)/g)].map((m) => m[1]);
}

Deno.test("every relative link in docs/ and README.md resolves, anchors included", () => {
  const broken: string[] = [];
  for (const file of markdownFiles()) {
    for (const target of linkTargets(file)) {
      if (/^[a-z]+:/.test(target)) continue; // https:, mailto:
      const [path, anchor] = target.split("#");
      const resolved = path === "" ? join(ROOT, file) : join(ROOT, dirname(file), path);
      let stat: Deno.FileInfo;
      try {
        stat = Deno.statSync(resolved);
      } catch {
        broken.push(`${file}: ${target} (no ${relative(ROOT, resolved)})`);
        continue;
      }
      if (anchor !== undefined && stat.isFile && resolved.endsWith(".md")) {
        if (!anchors(resolved).has(anchor)) broken.push(`${file}: ${target} (no such heading)`);
      }
    }
  }
  assert.deepEqual(broken, [], `broken links:\n${broken.join("\n")}`);
});

Deno.test("the guide's examples and figure scripts type-check", async () => {
  const out = await new Deno.Command(Deno.execPath(), {
    args: ["check", "docs/guide/"],
    cwd: ROOT,
    stdout: "piped",
    stderr: "piped",
    signal: AbortSignal.timeout(60_000),
  }).output();
  assert.ok(out.success, `deno check docs/guide/ failed:\n${new TextDecoder().decode(out.stderr)}`);
});

for (const file of examples) {
  Deno.test(`${file} prints what its chapter says`, async (t) => {
    for (const run of parseExample(file)) {
      await t.step(run.command, async () => {
        // As the reader types it: on one node the launcher's store takes a free port.
        const args = run.args;
        const result = await runDeno({
          args,
          task: run.task,
          // Shared memory unless the run line says otherwise, whatever the caller's environment.
          env: { DTRAIN_SHM: "1", ...run.env },
          timeoutMs: run.timeoutMs,
        });
        const output = result.stdout + result.stderr;
        assert.equal(
          result.code,
          run.exit,
          `${run.command} exited ${result.code}, not ${run.exit}:\n${output}`,
        );
        for (const want of run.expect) {
          assert.ok(output.includes(want), `${run.command} did not print "${want}":\n${output}`);
        }
        for (const want of run.expectMatch) {
          assert.match(output, want, `${run.command} printed nothing matching ${want}:\n${output}`);
        }
        assert.deepEqual(
          result.leftovers,
          [],
          `${run.command} left ${describeProcs(result.leftovers)}`,
        );
      });
    }
  });
}
