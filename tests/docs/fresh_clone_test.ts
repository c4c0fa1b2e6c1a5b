// The commands README.md and docs/nanogpt.md print, run end to end in a fresh clone right after
// `make train`, as a new user types them: from the clone's root, where docs/nanogpt.md's user puts
// nanoGPT's config file and input.txt, with `deno` on PATH as scripts/bootstrap.sh leaves it. Each runs as printed; the long ones get flags appended
// that cut their length (a few steps, not 2000 iterations), which override the printed values the
// way a user's extra flag would. `make test` is this suite, and is not run again.
//
// The clone reuses this checkout's CPU libraries (copied, newer than the sources, so make finds
// them up to date): compiling them again would only repeat what CI's `make test` just did.
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { ROOT, runDeno, withTempDir } from "../_harness/processes.ts";
import { FORTUNES_ROOT } from "../../src/data/text.ts";
import { SHAKESPEARE_CHAR } from "../train/_nanogpt_config.ts";
import { commandsOf, PAGES } from "./_commands.ts";

/** Flags appended to a long command, by task: they cut its length, nothing else. */
const SHORTER: Record<string, string[]> = {
  // The epoch job (README): two optimizer steps.
  "train": ["--max-steps", "2"],
  // nanoGPT's run (docs/nanogpt.md): 20 iterations, evaluated (and so saved) at 10 and 20.
  "train --config": [
    ...["--max-iters", "20", "--lr-decay-iters", "20", "--warmup-iters", "5"],
    ...["--eval-interval", "10"],
  ],
};

/** The user's script of the README's launcher line: an all-reduce over the job's ranks. */
const MY_SCRIPT = `import { dist, tensor } from "./mod.ts";
await dist.initProcessGroup({ backend: "gloo" });
const t = tensor([dist.getRank() + 1], [1]);
await dist.allReduce(t);
console.log(\`rank \${dist.getRank()}: sum \${t.item()}\`);
await dist.destroyProcessGroup();
`;

/** What each command must print (besides exiting 0), by its first words. */
const EXPECTED: [RegExp, RegExp][] = [
  [/^make train$/, /done: .*test accuracy [\d.]+%/],
  [/^deno task train --model gpt/, /done: .*validation loss [\d.]+/],
  [/^deno task train --strategy fsdp/, /done: .*test accuracy [\d.]+%/],
  [/^deno task launch/, /rank 0: sum 3/],
  [/^deno task docs/, /Written \d+ files|build\/docs|^$/m],
  [/^deno task prepare/, /prepare: char tokenizer, vocabulary \d+: \d+ train and \d+ val tokens/],
  [/^deno task train --config/, /step 20: train loss [\d.]+, val loss [\d.]+/],
  [/^deno task sample/, /ROMEO:/],
];

/** Files a command must leave in the clone, by its first words. */
const WRITES: [RegExp, string][] = [
  [/^deno task docs/, "build/docs/index.html"],
  [/^deno task prepare/, "data/shakespeare_char/train.bin"],
  [/^deno task train --config/, "out-shakespeare-char/model.safetensors"],
];

/** A shell word, quoted when it has to be. */
const quote = (w: string) => /^[\w./:=,@+-]+$/.test(w) ? w : `'${w.replaceAll("'", `'\\''`)}'`;

function git(args: string[], cwd = ROOT): string {
  const out = new Deno.Command("git", { args: ["-c", "safe.directory=*", ...args], cwd })
    .outputSync();
  const text = new TextDecoder().decode(out.stdout);
  assert.equal(out.code, 0, `git ${args.join(" ")}: ${new TextDecoder().decode(out.stderr)}`);
  return text.trim();
}

/** A fortune file's text, as Tiny Shakespeare's stand-in (CI has no copy of it). */
function someText(): string {
  return Deno.readTextFileSync(join(FORTUNES_ROOT, "fortunes")).slice(0, 120_000);
}

Deno.test({
  name:
    "the commands of README.md and docs/nanogpt.md run as printed in a fresh clone right after make train",
  sanitizeResources: false,
  async fn() {
    await withTempDir("dtrain_fresh_clone_", async (tmp) => {
      const clone = join(tmp, "dtrain");
      git(["clone", "-q", ROOT, clone], tmp);
      for (const lib of ["libdtrain.so", "libdtrain_gloo.so"]) {
        await Deno.mkdir(join(clone, "build"), { recursive: true });
        await Deno.copyFile(join(ROOT, "build", lib), join(clone, "build", lib));
      }
      await Deno.writeTextFile(join(clone, "my_script.ts"), MY_SCRIPT);
      await Deno.writeTextFile(join(clone, "train_shakespeare_char.py"), SHAKESPEARE_CHAR);
      await Deno.writeTextFile(join(clone, "input.txt"), someText());
      const env = { PATH: `${dirname(Deno.execPath())}:${Deno.env.get("PATH")}` };
      const ran: string[] = [];
      for (const page of PAGES) {
        for (const words of commandsOf(page, clone)) {
          const line = words.join(" ");
          if (line === "make test") continue;
          const task = words[0] === "deno" ? words[2] : "";
          const cut = SHORTER[`${task} ${words[3]}`] ?? SHORTER[task] ?? [];
          const shell = [...words, ...cut].map(quote).join(" ");
          const start = performance.now();
          const run = await runDeno({
            args: [shell],
            shell: true,
            cwd: clone,
            env,
            timeoutMs: 240_000,
          });
          console.log(`${((performance.now() - start) / 1000).toFixed(1)} s: ${shell}`);
          const output = run.stdout + run.stderr;
          assert.equal(
            run.code,
            0,
            `${page}: ${shell} exited ${run.code}:\n${output.slice(-3000)}`,
          );
          const expected = EXPECTED.find(([command]) => command.test(line));
          assert.ok(expected, `${page}: ${line}: this test does not know what it should print`);
          assert.match(output, expected[1], `${page}: ${shell}:\n${output.slice(-3000)}`);
          assert.deepEqual(run.leftovers, [], `${page}: ${shell} left processes behind`);
          for (const [command, path] of WRITES) {
            if (command.test(line)) assert.ok(existsSync(join(clone, path)), `${line}: no ${path}`);
          }
          ran.push(line);
        }
      }
      assert.ok(ran.length >= 8, `only ${ran.length} commands ran: ${ran.join("; ")}`);
      // The runs wrote only what .gitignore covers (nanoGPT's data/ and out-*/, runs/, build/).
      const dirty = git(["status", "--porcelain", "--untracked-files=all"], clone).split("\n")
        .filter((l) => l !== "" && !/ (my_script\.ts|train_shakespeare_char\.py)$/.test(l));
      assert.deepEqual(dirty, [], "files the commands wrote that git does not ignore");
    });
  },
});
