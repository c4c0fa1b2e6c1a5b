// Where an iteration-based job's time went: the `time:` line a tiny job prints at its end (each
// part in seconds and its share of the wall, summing to about the wall time), on one process and
// on 2 FSDP ranks; and the line's format from measured parts.
import assert from "node:assert/strict";
import { join } from "node:path";
import { withTempDir } from "../_harness/processes.ts";
import { freePort } from "../_harness/ranks.ts";
import { TimeSplit } from "../../src/train/_time_split.ts";
import { assertSucceeded, train } from "./_train.ts";
import { unprefixed, writeCharData } from "./_tokens.ts";

const TINY = [
  ...["--dataset", "tokens", "--n-layer", "1", "--n-head", "2", "--n-embd", "16"],
  ...["--block-size", "16", "--batch-size", "4", "--threads", "1"],
  ...["--max-iters", "12", "--eval-interval", "4", "--eval-iters", "3"],
];

/** The parts of a `time:` line, in seconds, and the wall time it names. */
function parseTimeLine(stdout: string): { wall: number; parts: Map<string, number> } {
  const line = unprefixed(stdout).split("\n").find((l) => l.startsWith("time: "));
  assert.ok(line, `no time: line in\n${stdout}`);
  const [, wall, rest] = /^time: ([\d.]+) s: (.*)$/.exec(line)!;
  const parts = new Map<string, number>();
  for (const [, name, seconds] of rest.matchAll(/([a-z-]+) ([\d.]+) s \(\d+%/g)) {
    parts.set(name, Number(seconds));
  }
  return { wall: Number(wall), parts };
}

/** Checks the parts a job's line names, and that they add up to its wall time. */
function assertAccounted(stdout: string, evaluations: boolean, checkpoints: boolean): void {
  const { wall, parts } = parseTimeLine(stdout);
  for (const part of ["iterations", "start-up", "end"]) assert.ok(parts.has(part), part);
  assert.equal(parts.has("evaluation"), evaluations, stdout);
  assert.equal(parts.has("checkpoints"), checkpoints, stdout);
  assert.ok(!parts.has("other"), `time no part counted: ${stdout}`);
  const sum = [...parts.values()].reduce((a, b) => a + b, 0);
  // Each part is rounded to 0.1 s.
  assert.ok(Math.abs(sum - wall) <= 0.05 * parts.size + 0.02 * wall, `${sum} s of ${wall} s`);
}

Deno.test("a tiny token job ends with where its time went, the parts summing to the wall time", async () => {
  await withTempDir("dtrain_time_split_", async (dir) => {
    const data = join(dir, "data");
    await writeCharData(data);
    const run = await train([
      ...TINY,
      ...["--data-dir", data, "--out-dir", join(dir, "out"), "--nproc-per-node", "1"],
    ], { timeoutMs: 120_000 });
    assertSucceeded(run);
    assertAccounted(run.stdout, true, true);
    assert.match(run.stdout, /iterations [\d.]+ s \(\d+%; the first [\d.]+ s\)/);
  });
});

Deno.test("a 2-rank FSDP token job prints one time line, on rank 0", async () => {
  await withTempDir("dtrain_time_split_fsdp_", async (dir) => {
    const data = join(dir, "data");
    await writeCharData(data);
    const run = await train([
      ...TINY,
      ...["--data-dir", data, "--out-dir", join(dir, "out"), "--nproc-per-node", "2"],
      ...["--strategy", "fsdp", "--gradient-accumulation-steps", "2"],
      ...["--master-port", String(freePort())],
    ], { timeoutMs: 120_000 });
    assertSucceeded(run);
    assert.equal(run.stdout.match(/time: /g)?.length, 1, run.stdout);
    assert.match(run.stdout, /\[rank 0\] time: /);
    assertAccounted(run.stdout, true, true);
  });
});

Deno.test("TimeSplit's line: seconds and shares of the wall, parts with no time left out, gaps as other", () => {
  const times = new TimeSplit();
  times.add("start-up", 1000);
  times.add("iterations", 6000);
  times.firstIterationMs = 500;
  times.add("evaluation", 2000);
  assert.equal(
    times.summary(10_000),
    "time: 10.0 s: iterations 6.0 s (60%; the first 0.5 s), evaluation 2.0 s (20%), " +
      "start-up 1.0 s (10%), other 1.0 s (10%)",
  );
  times.add("end", 1000);
  assert.doesNotMatch(times.summary(10_000), /other|checkpoints/);
});

Deno.test("TimeSplit.measure counts what it runs, even when it throws", async () => {
  const times = new TimeSplit();
  const value = await times.measure("checkpoints", async () => {
    await new Promise((resolve) => setTimeout(resolve, 30));
    return 7;
  });
  assert.equal(value, 7);
  await assert.rejects(times.measure("evaluation", () => {
    throw new Error("no");
  }));
  assert.ok(times.ms("checkpoints") >= 25, `${times.ms("checkpoints")}`);
  assert.ok(times.ms("evaluation") >= 0);
});
