// scripts/gpu_check.sh, checked where it is written: it parses, shellcheck finds nothing, its
// steps' time limits (each with the grace `timeout --kill-after` gives) fit the 9 minutes the check
// promises, it writes its results where it is told (a relative path being the caller's) and ends
// with its summary line, and its judge counts a skipped test or benchmark as a failure where a GPU
// is visible. (The GPU steps need a GPU machine; the machine and cuda steps run here.) With --host
// its build, cuda and training steps run here for real, on the host build of the CUDA library, and
// pass (its tests step is the rest of the CUDA tests, which the suite runs anyway).
import assert from "node:assert/strict";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { hasCommand } from "../infrastructure/shell.ts";
import { withTempDir } from "../_harness/processes.ts";

const ROOT = fileURLToPath(new URL("../../", import.meta.url));
const SCRIPT = join(ROOT, "scripts/gpu_check.sh");
const text = Deno.readTextFileSync(SCRIPT);

/** Runs the script with `args` from `cwd`; its exit code and stdout. */
async function gpuCheck(
  args: string[],
  cwd: string,
  env: Record<string, string> = {},
): Promise<{ code: number; out: string }> {
  const { code, stdout, stderr } = await new Deno.Command("bash", {
    args: [SCRIPT, ...args],
    cwd,
    env,
    stdout: "piped",
    stderr: "piped",
  }).output();
  const decode = (b: Uint8Array) => new TextDecoder().decode(b);
  return { code, out: decode(stdout) + decode(stderr) };
}

Deno.test("scripts/gpu_check.sh parses with bash -n", async () => {
  const output = await new Deno.Command("bash", { args: ["-n", SCRIPT], stderr: "piped" }).output();
  assert.ok(output.success, new TextDecoder().decode(output.stderr));
});

Deno.test({
  name: `shellcheck finds nothing in scripts/gpu_check.sh${
    hasCommand("shellcheck") ? "" : " [skipped: shellcheck not found]"
  }`,
  ignore: !hasCommand("shellcheck"),
}, async () => {
  const output = await new Deno.Command("shellcheck", { args: [SCRIPT], stdout: "piped" }).output();
  assert.ok(output.success, new TextDecoder().decode(output.stdout));
});

Deno.test("gpu_check.sh's step limits, with kill grace and the GPU count, add up to <= 540 s", () => {
  const grace = Number(/timeout --kill-after=(\d+) /.exec(text)?.[1]);
  assert.ok(grace > 0, "every step runs under timeout --kill-after");
  const steps = [...text.matchAll(/^step (\S+) (\d+) "/gm)].map((m) => [m[1], Number(m[2])]);
  const keys = steps.map(([key]) => key);
  assert.deepEqual(keys, [
    "unpack",
    "machine",
    "build",
    "cuda",
    "tests",
    "train",
    "bench-dtrain",
    "bench-torch",
  ]);
  // Counting the GPUs before the steps is bounded too (timeout -k 1 4: 5 s at most).
  assert.match(text, /^gpus=\$\(timeout -k 1 4 nvidia-smi -L/m);
  const total = steps.reduce((sum, [, limit]) => sum + (limit as number) + grace, 0) + 5;
  assert.ok(total <= 540, `${total} s`);
  // The header states the same sum.
  assert.match(text, new RegExp(`= ${total} s <= 540 s`));
  // An NCCL hang in the training tests costs at most 45 s: their subprocesses' limit.
  const train = Deno.readTextFileSync(join(ROOT, "tests/train/train_cuda_test.ts"));
  assert.match(train, /^const SUBPROCESS_MS = 45_000;$/m);
  assert.doesNotMatch(train, /timeoutMs: \d/, "every timeout there is one of the two constants");
});

Deno.test("gpu_check.sh writes its results where told, relative to the caller, and ends with its summary", async () => {
  await withTempDir("dtrain-gpu-check-", async (dir) => {
    // (build/ aside: a concurrent `make` may create it.)
    const rootEntries = () =>
      [...Deno.readDirSync(ROOT)].map((e) => e.name).filter((n) => n !== "build").sort();
    const before = rootEntries();
    // "machine" passes anywhere; "cuda" fails where no GPU is, which is here: no test machine of
    // this project has one (the step's own output says so if that changes).
    const run = await gpuCheck(["out/results.txt"], dir, { GPU_CHECK_STEPS: "machine cuda" });
    const results = Deno.readTextFileSync(join(dir, "out/results.txt"));
    assert.deepEqual(rootEntries(), before, "nothing written in the repository root");
    assert.match(results, /^== machine \(limit 15s\)$/m);
    assert.match(results, /^-- machine: passed \(exit 0\) after \d+s$/m);
    assert.doesNotMatch(results, /== build|== CUDA tests/, "only the steps asked for run");
    const lines = results.trimEnd().split("\n");
    assert.match(lines.at(-2)!, /^== done in \d+s; results in .*\/out\/results\.txt$/);
    if (/^-- cuda available: passed/m.test(results)) {
      assert.equal(lines.at(-1), "gpu_check: 3 steps, 3 passed, 0 failed");
      assert.equal(run.code, 0, run.out);
    } else {
      assert.match(results, /^-- cuda available: FAILED \(exit 1\) after \d+s$/m);
      assert.equal(lines.at(-1), "gpu_check: 3 steps, 2 passed, 1 failed");
      assert.equal(run.code, 1, run.out);
    }
    assert.equal(
      run.out.trimEnd().split("\n").at(-1),
      lines.at(-1),
      "stdout ends as the file does",
    );
  });
});

/** The judge's verdict on a step that exited `rc` after printing `output`, with `gpus` GPUs. */
async function judge(gpus: number, rc: number, output: string): Promise<[number, string]> {
  return await withTempDir("dtrain-gpu-judge-", async (dir) => {
    Deno.writeTextFileSync(join(dir, "output"), output);
    const run = await gpuCheck(["--judge", String(gpus), String(rc), join(dir, "output")], dir);
    return [run.code, run.out.trim()];
  });
}

Deno.test("gpu_check.sh's judge: a skipped test or benchmark fails a step where a GPU is visible", async () => {
  const summaryOnly = "ok | 15 passed | 0 failed | 36 ignored (3s)\n";
  assert.deepEqual(await judge(1, 0, summaryOnly), [
    1,
    "FAILED (36 test(s) skipped with 1 GPU(s) visible)",
  ]);
  assert.deepEqual(await judge(0, 0, summaryOnly), [0, "passed (exit 0)"]);

  // Ignored because there is a GPU (availability_test.ts's no-GPU checks): no "[skipped: ...]".
  const tests = "running 3 tests from ./tests/cuda/x_test.ts\n" +
    "cuda.isAvailable() is false with a reason ... ignored (0ms)\n" +
    "ops on cuda match cpu [skipped: no CUDA library] ... ignored (0ms)\n" +
    "z ... ok (1ms)\n\nok | 1 passed | 0 failed | 2 ignored (12ms)\n";
  assert.deepEqual(await judge(2, 0, tests), [
    1,
    "FAILED (1 test(s) skipped with 2 GPU(s) visible: ops on cuda match cpu [skipped: no CUDA library])",
  ]);
  const byDesign = tests.replace(/.*\[skipped.*\n/, "").replace("2 ignored", "1 ignored");
  assert.deepEqual(await judge(1, 0, byDesign), [0, "passed (exit 0)"]);

  const bench = '{"framework":"dtrain","skipped":"CUDA is not available: no GPU"}\n';
  assert.deepEqual(await judge(1, 0, bench), [
    1,
    'FAILED (skipped with 1 GPU(s) visible: "skipped":"CUDA is not available: no GPU"})',
  ]);
  assert.deepEqual(await judge(0, 0, bench), [0, "passed (exit 0)"]);
  assert.deepEqual(await judge(1, 0, '{"framework":"pytorch","tokensPerSecond":1}\n'), [
    0,
    "passed (exit 0)",
  ]);

  assert.deepEqual(await judge(0, 124, ""), [1, "FAILED (exit 124: timed out)"]);
  assert.deepEqual(await judge(1, 3, "ok | 1 passed | 0 failed (1ms)\n"), [1, "FAILED (exit 3)"]);
});

const canBuild = hasCommand("make") && hasCommand("c++");

Deno.test({
  name: `gpu_check.sh --host builds the host build and passes its cuda and training steps on it${
    canBuild ? "" : " [skipped: make or c++ not found]"
  }`,
  ignore: !canBuild,
}, async () => {
  await withTempDir("dtrain-gpu-check-host-", async (dir) => {
    // The benchmarks are asked for too: --host does not run them (GPT-2 small needs a GPU).
    const steps = "machine build cuda train bench-dtrain bench-torch";
    const run = await gpuCheck(["--host", "results.txt"], dir, { GPU_CHECK_STEPS: steps });
    const results = Deno.readTextFileSync(join(dir, "results.txt"));
    assert.equal(run.code, 0, run.out);
    assert.match(
      results,
      /^on the host build \(.*build\/libdtrain_cuda_host\.so, .*\); limits x4/m,
    );
    // The build step makes the host build, with four times the GPU machine's limit.
    assert.match(results, /^== build \(limit 400s\)$/m);
    assert.match(results, /^-- build: passed \(exit 0\) after \d+s$/m);
    assert.match(results, /^libdtrain_cuda\.so: the host build \(.*libdtrain_cuda_host\.so\)$/m);
    // Its devices count as GPUs: a skipped GPU test would fail the training step.
    assert.match(results, /^\d+ GPU\(s\): /m);
    assert.match(results, /^-- cuda available: passed/m);
    assert.match(
      results,
      /^-- CUDA training tests \(tests\/train\/train_cuda_test\.ts, NCCL\): passed/m,
    );
    assert.doesNotMatch(results, /== benchmark/);
    const lines = results.trimEnd().split("\n");
    assert.match(lines.at(-2)!, /^== done in \d+s; results in .*\/results\.txt$/);
    assert.equal(lines.at(-1), "gpu_check: 5 steps, 5 passed, 0 failed");
  });
  const usage = await gpuCheck(["--host", "--pack"], ROOT);
  assert.equal(usage.code, 2, usage.out);
  assert.match(usage.out, /usage: gpu_check\.sh --host \[RESULTS_FILE\]/);
});

Deno.test("gpu_check.sh with no results file writes into $OUT when it is set, else the caller's folder", async () => {
  await withTempDir("dtrain-gpu-check-out-", async (dir) => {
    const rootEntries = () =>
      [...Deno.readDirSync(ROOT)].map((e) => e.name).filter((n) => n !== "build").sort();
    const before = rootEntries();
    // A device machine's $OUT: what it writes there comes back (it used to go into the checkout).
    const out = join(dir, "device-out");
    await gpuCheck([], ROOT, { OUT: out, GPU_CHECK_STEPS: "machine" });
    const results = Deno.readTextFileSync(join(out, "gpu_check_results.txt"));
    assert.match(results, /^-- machine: passed \(exit 0\) after \d+s$/m);
    assert.deepEqual(rootEntries(), before, "nothing written in the repository");
    // Without $OUT, the caller's folder, as before.
    await gpuCheck([], dir, { OUT: "", GPU_CHECK_STEPS: "machine" });
    assert.match(
      Deno.readTextFileSync(join(dir, "gpu_check_results.txt")),
      /^gpu_check: 2 steps, 2 passed, 0 failed$/m,
    );
  });
});
