// Paths are the user's: `deno task` runs the job in the repository's root and says in INIT_CWD
// where the user ran it from; relative paths are resolved from there, and a file error names the
// absolute path it tried.
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { ROOT, runDeno, withTempDir } from "../_harness/processes.ts";
import { assertSucceeded, train } from "./_train.ts";
import { writeCharData } from "./_tokens.ts";

const TINY = [
  ...["--dataset", "tokens", "--n-layer", "1", "--n-head", "2", "--n-embd", "16"],
  ...["--block-size", "16", "--batch-size", "4", "--threads", "1", "--max-iters", "2"],
  ...["--eval-interval", "2", "--eval-iters", "1", "--warmup-iters", "1", "--lr-decay-iters", "2"],
];

Deno.test("train resolves relative paths from INIT_CWD, where deno task was run, not the repository", async () => {
  await withTempDir("dtrain_user_cwd_", async (dir) => {
    const name = `dtrain-user-cwd-${crypto.randomUUID()}`;
    await writeCharData(join(dir, name, "data"));
    // A config file, and the data and output folders it and the flags name, all relative.
    await Deno.writeTextFile(join(dir, "job.json"), JSON.stringify({ logInterval: 1 }));
    const env = { INIT_CWD: dir };
    const run = await train(
      [...TINY, "--config", "job.json", "--data-dir", `${name}/data`, "--out-dir", `${name}/out`],
      { env, timeoutMs: 60_000 },
    );
    assertSucceeded(run);
    assert.ok(existsSync(join(dir, name, "out", "snapshot.safetensors")), run.stdout);
    assert.ok(!existsSync(join(ROOT, name)), "nothing is written under the repository");

    const missing = await train([...TINY, "--data-dir", "nowhere"], { env, timeoutMs: 30_000 });
    assert.equal(missing.code, 2, missing.stderr);
    assert.ok(missing.stderr.includes(join(dir, "nowhere")), missing.stderr);
    const config = await train(["--config", "absent.json"], { env, timeoutMs: 30_000 });
    assert.equal(config.code, 2, config.stderr);
    assert.match(config.stderr, new RegExp(`^train: config: cannot read ${dir}/absent\\.json: `));
  });
});

Deno.test("a process started outside the repository ignores an inherited INIT_CWD", async () => {
  await withTempDir("dtrain_user_cwd_", async (dir) => {
    // As a test's child run from a temporary folder inherits INIT_CWD from `deno task test`.
    const run = await runDeno({
      cwd: dir,
      env: { INIT_CWD: ROOT },
      timeoutMs: 30_000,
      args: [`${ROOT}src/train/main.ts`, "--config", "absent.json"],
    });
    assert.equal(run.code, 2, run.stderr);
    assert.match(run.stderr, new RegExp(`^train: config: cannot read ${dir}/absent\\.json: `));
  });
});

Deno.test("the launcher runs the script the user named from INIT_CWD", async () => {
  await withTempDir("dtrain_user_cwd_", async (dir) => {
    await Deno.writeTextFile(
      join(dir, "hello.ts"),
      'console.log(`hello from rank ${Deno.env.get("RANK")}`);\n',
    );
    const run = await runDeno({
      env: { INIT_CWD: dir },
      timeoutMs: 30_000,
      args: [`${ROOT}src/launch/main.ts`, "--log-dir", "logs", "hello.ts"],
    });
    assertSucceeded(run);
    assert.match(run.stdout, /^\[rank 0\] hello from rank 0$/m);
    assert.ok(existsSync(join(dir, "logs", "rank_0.log")), "--log-dir is the user's too");
  });
});

Deno.test("prepare reads its inputs and writes its folder from INIT_CWD, and names the absolute path of a missing input", async () => {
  await withTempDir("dtrain_user_cwd_", async (dir) => {
    await Deno.writeTextFile(join(dir, "input.txt"), "to be or not to be\n".repeat(50));
    const env = { INIT_CWD: dir };
    const args = [`${ROOT}src/prepare/main.ts`, "--tokenizer", "char", "--out", "data/chars"];
    const run = await runDeno({ env, timeoutMs: 30_000, args: [...args, "--input", "input.txt"] });
    assertSucceeded(run);
    assert.ok(existsSync(join(dir, "data", "chars", "train.bin")), run.stdout);
    const missing = await runDeno({
      env,
      timeoutMs: 30_000,
      args: [...args, "--input", "gone.txt"],
    });
    assert.equal(missing.code, 2, missing.stderr);
    assert.ok(
      missing.stderr.includes(`--input ${join(dir, "gone.txt")}: no such file`),
      missing.stderr,
    );
  });
});
