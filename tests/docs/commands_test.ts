// The commands README.md and docs/nanogpt.md print are commands dtrain takes as printed: each
// `make` target exists, each `deno task` is a task of deno.json, and each task's flags parse (the
// train job's with nanoGPT's config file in the user's folder, where the page says it is), so a
// renamed flag or task cannot leave the first page a user reads wrong. fresh_clone_test.ts runs
// them end to end.
import assert from "node:assert/strict";
import { join } from "node:path";
import { ROOT, withTempDir } from "../_harness/processes.ts";
import { parseLaunchArgs } from "../../src/launch/options.ts";
import { parsePrepareArgs } from "../../src/prepare/main.ts";
import { parseTrainArgs } from "../../src/train/config.ts";
import { parseSampleArgs } from "../../src/train/sample.ts";
import { SHAKESPEARE_CHAR } from "../train/_nanogpt_config.ts";
import { commandsOf, PAGES, words } from "./_commands.ts";

const tasks = Object.keys(JSON.parse(Deno.readTextFileSync(join(ROOT, "deno.json"))).tasks);
const makefile = Deno.readTextFileSync(join(ROOT, "Makefile"));

/** Parses a task's flags as the task would, or says why the command is not one dtrain takes. */
const PARSERS: Record<string, (args: string[]) => unknown> = {
  train: parseTrainArgs,
  prepare: parsePrepareArgs,
  launch: parseLaunchArgs,
  sample: parseSampleArgs,
};

Deno.test("every command README.md and docs/nanogpt.md print is a make target or a deno task whose flags parse", async () => {
  await withTempDir("dtrain_docs_commands_", async (user) => {
    // The user's folder, as docs/nanogpt.md sets it up: nanoGPT's config file beside input.txt.
    await Deno.writeTextFile(join(user, "train_shakespeare_char.py"), SHAKESPEARE_CHAR);
    await Deno.writeTextFile(join(user, "input.txt"), "First Citizen:\nBefore we proceed\n");
    const before = Deno.env.get("INIT_CWD");
    Deno.env.set("INIT_CWD", user);
    try {
      let checked = 0;
      for (const page of PAGES) {
        for (const [tool, name, ...args] of commandsOf(page)) {
          const what = `${page}: ${[tool, name, ...args].join(" ")}`;
          if (tool === "make") {
            assert.match(makefile, new RegExp(`^${name}:`, "m"), `${what}: no such make target`);
          } else {
            assert.ok(tool === "deno" && name === "task", `${what}: neither make nor deno task`);
            const [task, ...flags] = args;
            assert.ok(tasks.includes(task), `${what}: deno.json has no task ${task}`);
            assert.doesNotThrow(() => PARSERS[task]?.(flags), what);
          }
          checked++;
        }
      }
      assert.ok(checked >= 10, `only ${checked} commands found: the pages' blocks are not read`);
    } finally {
      if (before === undefined) Deno.env.delete("INIT_CWD");
      else Deno.env.set("INIT_CWD", before);
    }
  });
});

Deno.test("the command reader joins continuation lines, keeps quoted words and drops comments", () => {
  assert.deepEqual(words('deno task sample --start "ROMEO: hi" # a comment'), [
    "deno",
    "task",
    "sample",
    "--start",
    "ROMEO: hi",
  ]);
});
