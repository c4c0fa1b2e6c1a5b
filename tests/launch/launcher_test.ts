// The launcher as a real process tree: rank environment, prefixed output and per-rank logs,
// failure handling, restarts, signals, a busy port, bad flags and the multi-node token rule.
import { fileURLToPath } from "node:url";
import assert from "node:assert/strict";
import { join } from "node:path";
import { freePort } from "../_harness/ranks.ts";
import {
  describe,
  type MarkedProcess,
  markedProcesses,
  ROOT,
  runDeno,
  type RunOptions,
  type RunResult,
  withTempDir,
} from "../_harness/processes.ts";

const LAUNCHER = `${ROOT}src/launch/main.ts`;
const WORKER = fileURLToPath(new URL("./workers/worker.ts", import.meta.url));
const FLAKY_SPAWN_LAUNCHER = fileURLToPath(new URL("./workers/flaky_spawn.ts", import.meta.url));

/** Runs the launcher with `flags`, then the test worker with `workerArgs`. */
function launch(
  flags: string[],
  workerArgs: string[],
  options: Partial<RunOptions> = {},
): Promise<RunResult> {
  return runDeno({
    timeoutMs: 20_000,
    ...options,
    args: [LAUNCHER, "--master-port", String(freePort()), ...flags, WORKER, ...workerArgs],
  });
}

function assertNoLeftovers(run: RunResult): void {
  assert.deepEqual(run.leftovers, [], `left behind: ${describe(run.leftovers)}`);
}

/** The JSON objects rank workers printed, by rank, from the launcher's prefixed stdout. */
function printedJson(stdout: string): Map<number, Record<string, string | null>> {
  const byRank = new Map<number, Record<string, string | null>>();
  for (const match of stdout.matchAll(/^\[rank (\d+)\] (\{.*\})$/gm)) {
    byRank.set(Number(match[1]), JSON.parse(match[2]));
  }
  return byRank;
}

Deno.test("launch sets the distributed environment of every rank, prefixes output and logs per rank", async () => {
  await withTempDir("dtrain_launch_", async (logDir) => {
    const port = freePort();
    const run = await runDeno({
      timeoutMs: 20_000,
      args: [
        LAUNCHER,
        "--nproc-per-node",
        "2",
        "--master-port",
        String(port),
        "--log-dir",
        logDir,
        WORKER,
        "env",
      ],
    });
    assert.equal(run.code, 0, run.stderr);
    assertNoLeftovers(run);
    const envs = printedJson(run.stdout);
    assert.deepEqual([...envs.keys()].sort(), [0, 1], run.stdout);
    const threads = String(Math.max(1, Math.floor(navigator.hardwareConcurrency / 2)));
    const token = envs.get(0)!.DTRAIN_TOKEN;
    assert.ok(token && token.length >= 32, `DTRAIN_TOKEN "${token}" is missing or short`);
    for (const rank of [0, 1]) {
      assert.deepEqual(envs.get(rank), {
        RANK: String(rank),
        LOCAL_RANK: String(rank),
        WORLD_SIZE: "2",
        LOCAL_WORLD_SIZE: "2",
        GROUP_RANK: "0",
        MASTER_ADDR: "127.0.0.1",
        MASTER_PORT: String(port),
        DTRAIN_TOKEN: token,
        DTRAIN_RESTART_COUNT: "0",
        OPENBLAS_NUM_THREADS: threads,
      });
      const log = await Deno.readTextFile(join(logDir, `rank_${rank}.log`));
      assert.match(log, /^--- attempt 0, rank \d, pid \d+$/m);
      assert.ok(log.includes(`"RANK":"${rank}"`), log);
      assert.doesNotMatch(log, /\[rank/, "log lines carry no prefix");
    }
    assert.deepEqual((await Array.fromAsync(Deno.readDir(logDir))).map((e) => e.name).sort(), [
      "rank_0.log",
      "rank_1.log",
    ]);
  });
});

Deno.test("launch on node 1 of 2 numbers its ranks after node 0's and passes DTRAIN_TOKEN on", async () => {
  await withTempDir("dtrain_launch_", async (logDir) => {
    const run = await launch(
      ["--nnodes", "2", "--node-rank", "1", "--nproc-per-node", "2", "--log-dir", logDir],
      ["env"],
      { env: { DTRAIN_TOKEN: "node-secret-0123456789abcdef012345" } },
    );
    assert.equal(run.code, 0, run.stderr);
    assertNoLeftovers(run);
    const envs = printedJson(run.stdout);
    for (const [localRank, rank] of [[0, 2], [1, 3]]) {
      const env = envs.get(rank)!;
      assert.equal(env.RANK, String(rank));
      assert.equal(env.LOCAL_RANK, String(localRank));
      assert.equal(env.WORLD_SIZE, "4");
      assert.equal(env.LOCAL_WORLD_SIZE, "2");
      assert.equal(env.GROUP_RANK, "1");
      assert.equal(env.DTRAIN_TOKEN, "node-secret-0123456789abcdef012345");
    }
    assert.deepEqual((await Array.fromAsync(Deno.readDir(logDir))).map((e) => e.name).sort(), [
      "rank_2.log",
      "rank_3.log",
    ]);
  });
});

Deno.test("launch stops the other workers when one fails and names the first failing rank with its log tail", async () => {
  await withTempDir("dtrain_launch_", async (logDir) => {
    const started = performance.now();
    const run = await launch(["--nproc-per-node", "3", "--log-dir", logDir], ["fail", "1"]);
    assert.equal(run.code, 1, run.stderr);
    assertNoLeftovers(run);
    assert.match(run.stderr, /launch: rank 1 \(local rank 1\) exited with code 3; last lines of /);
    assert.ok(run.stderr.includes(join(logDir, "rank_1.log")), run.stderr);
    assert.match(run.stderr, /^ {2}rank 1 failing on purpose in attempt 0$/m, "the log tail");
    assert.doesNotMatch(run.stderr, /launch: rank [02] /, "only the first failure is blamed");
    // The waiting ranks die on SIGTERM; the SIGKILL grace period (5 s) is not needed.
    assert.ok(performance.now() - started < 10_000, "stopping the others took too long");
  });
});

Deno.test("launch --max-restarts 1 restarts the whole group after a failure", async () => {
  await withTempDir("dtrain_launch_", async (logDir) => {
    const run = await launch(
      ["--nproc-per-node", "2", "--max-restarts", "1", "--log-dir", logDir],
      ["fail-once", "1"],
    );
    assert.equal(run.code, 0, run.stderr);
    assertNoLeftovers(run);
    assert.match(
      run.stderr,
      /launch: rank 1 exited with code 3; restarting the group \(restart 1\/1\)/,
    );
    for (const rank of [0, 1]) {
      assert.match(run.stdout, new RegExp(`^\\[rank ${rank}\\] attempt 1 ready$`, "m"));
      const log = await Deno.readTextFile(join(logDir, `rank_${rank}.log`));
      assert.match(log, /--- attempt 0,[^]*--- attempt 1,/, `rank ${rank}'s log has both attempts`);
    }
  });
});

for (const restarts of [0, 1, 2]) {
  Deno.test(`launch --max-restarts ${restarts} runs a group that always fails exactly ${restarts + 1} time(s)`, async () => {
    await withTempDir("dtrain_launch_", async (logDir) => {
      const run = await launch(
        ["--nproc-per-node", "2", "--max-restarts", String(restarts), "--log-dir", logDir],
        ["fail", "1"],
        { timeoutMs: 30_000 },
      );
      assert.equal(run.code, 1, run.stderr);
      assertNoLeftovers(run);
      assert.equal(run.stderr.match(/restarting the group/g)?.length ?? 0, restarts, run.stderr);
      for (const rank of [0, 1]) {
        const ready = new RegExp(`^\\[rank ${rank}\\] attempt (\\d+) ready$`, "gm");
        const attempts = [...run.stdout.matchAll(ready)].map((m) => Number(m[1]));
        assert.deepEqual(attempts, Array.from({ length: restarts + 1 }, (_, i) => i), run.stdout);
        const log = await Deno.readTextFile(join(logDir, `rank_${rank}.log`));
        assert.equal(log.match(/^--- attempt \d+,/gm)?.length, restarts + 1, log);
      }
    });
  });
}

Deno.test("launch without restarts left fails after the last restart", async () => {
  const run = await launch(["--nproc-per-node", "2", "--max-restarts", "1"], ["fail", "0"]);
  assert.equal(run.code, 1, run.stderr);
  assertNoLeftovers(run);
  assert.match(run.stderr, /restarting the group \(restart 1\/1\)/);
  assert.match(run.stderr, /launch: rank 0 \(local rank 0\) exited with code 3; last lines of /);
});

/** Launches 2 ranks of `mode` and sends `signal` to the launcher once both are ready. */
async function interrupt(signal: Deno.Signal, mode: string): Promise<RunResult> {
  const ready = new Set<string>();
  const run = await launch(["--nproc-per-node", "2", "--max-restarts", "3"], [mode], {
    onLine: (line, running) => {
      const m = line.match(/^\[rank (\d+)\] ready$/);
      if (!m) return;
      ready.add(m[1]);
      if (ready.size === 2) running.kill(signal);
    },
  });
  assert.equal(ready.size, 2, `both ranks started: ${run.stdout}`);
  assertNoLeftovers(run);
  assert.doesNotMatch(run.stderr, /restarting/, "a signal is not a failure to restart from");
  return run;
}

for (
  const [signal, code] of [
    ["SIGTERM", 143],
    ["SIGINT", 130],
    ["SIGHUP", 129],
    ["SIGQUIT", 131],
  ] as const
) {
  Deno.test(`launch forwards ${signal} to the workers and exits ${code} with none left`, async () => {
    const run = await interrupt(signal, "wait");
    assert.equal(run.code, code, run.stderr);
  });

  Deno.test(`launch exits ${code} on ${signal} even when the workers shut down cleanly`, async () => {
    const run = await interrupt(signal, "graceful");
    for (const rank of [0, 1]) {
      assert.match(run.stdout, new RegExp(`^\\[rank ${rank}\\] got ${signal}$`, "m"));
    }
    assert.equal(run.code, code, run.stderr);
  });

  Deno.test(`launch SIGKILLs workers that ignore ${signal} after the grace period and exits ${code}`, async () => {
    const started = performance.now();
    const run = await interrupt(signal, "stubborn");
    for (const rank of [0, 1]) {
      assert.match(run.stdout, new RegExp(`^\\[rank ${rank}\\] got ${signal}$`, "m"));
    }
    assert.equal(run.code, code, run.stderr);
    // The default grace period is 5 s; the run's own limit is 20 s.
    assert.ok(performance.now() - started < 15_000, "the launcher waited too long");
  });
}

/** Worker modes that must not outlive their launcher: one never touches dtrain, one only inits. */
const ORPHAN_MODES = [
  ["wait", "plain scripts that never initialise a process group"],
  ["dist-wait", "scripts that only call initProcessGroup"],
] as const;

/**
 * Runs 2 ranks of `mode` (through `deno task launch` when `task`), SIGKILLs the started process
 * once both are ready, and returns the run with what was alive just before the kill.
 */
async function killOnceReady(mode: string, task = false) {
  const ready = new Set<string>();
  let before: MarkedProcess[] = [];
  let killedAt = 0;
  const flags = ["--master-port", String(freePort()), "--nproc-per-node", "2"];
  const run = await runDeno({
    timeoutMs: 20_000,
    task,
    args: [...(task ? ["launch"] : [LAUNCHER]), ...flags, WORKER, mode],
    leftoverGraceMs: 2_000,
    onLine: (line, running) => {
      const m = line.match(/^\[rank (\d+)\] ready$/);
      if (!m) return;
      ready.add(m[1]);
      if (ready.size === 2) {
        before = markedProcesses(running.marker, running.child.pid);
        killedAt = performance.now();
        running.kill("SIGKILL");
      }
    },
  });
  assert.equal(run.signal, "SIGKILL", run.stderr);
  return { run, before, afterKillMs: performance.now() - killedAt };
}

for (const [mode, what] of ORPHAN_MODES) {
  Deno.test(`${what} exit within 2 s when the launcher is SIGKILLed`, async () => {
    const { run, before, afterKillMs } = await killOnceReady(mode);
    assert.deepEqual(before.map((p) => p.role).sort(), ["main process", "rank 0", "rank 1"]);
    assert.deepEqual(run.leftovers, [], `still running 2 s later: ${describe(run.leftovers)}`);
    assert.ok(afterKillMs < 5_000);
  });
}

Deno.test("SIGKILL of the outer `deno task launch` process ends the launcher and its workers", async () => {
  const { run, before } = await killOnceReady("wait", true);
  const roles = before.map((p) => p.role).sort();
  assert.deepEqual(roles.filter((r) => r.startsWith("rank")), ["rank 0", "rank 1"]);
  assert.ok(roles.includes("main process") && roles.length === 4, `processes: ${roles}`);
  assert.deepEqual(run.leftovers, [], `still running 2 s later: ${describe(run.leftovers)}`);
});

Deno.test("launch stops the workers already started when a later spawn fails, and names the rank", async () => {
  const run = await runDeno({
    timeoutMs: 20_000,
    env: { DTRAIN_TEST_FAIL_SPAWN: "3" },
    args: [
      FLAKY_SPAWN_LAUNCHER,
      "--master-port",
      String(freePort()),
      "--nproc-per-node",
      "3",
      WORKER,
      "wait",
    ],
  });
  assert.equal(run.code, 1, run.stderr);
  assertNoLeftovers(run);
  assert.match(
    run.stderr,
    /^launch: cannot start rank 2 \(local rank 2\): spawn 3 failed on purpose; stopped the 2 worker\(s\) already started$/m,
  );
});

Deno.test("launch names the address when --master-port is busy", async () => {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  try {
    const port = listener.addr.port;
    const run = await runDeno({
      timeoutMs: 20_000,
      args: [LAUNCHER, "--master-port", String(port), WORKER, "env"],
    });
    assert.equal(run.code, 1, run.stderr);
    assertNoLeftovers(run);
    assert.ok(run.stderr.includes(`127.0.0.1:${port}`), run.stderr);
    assert.equal(run.stdout, "", "no worker started");
  } finally {
    listener.close();
  }
});

const BAD_FLAGS: [string[], RegExp][] = [
  [["--nproc-per-node", "0"], /--nproc-per-node: /],
  [["--master-port", "abc"], /--master-port: expected a number, got "abc"/],
  [["--master-port", "70000"], /--master-port: /],
  [["--max-restarts", "-1"], /Option '--max-restarts' argument is ambiguous/],
  [["--max-restarts=-1"], /--max-restarts: Too small/],
  [["--nnodes", "2", "--node-rank", "2"], /--node-rank: must be below --nnodes/],
  [["--bogus", "1"], /--bogus/],
  [["--nnodes", "0:2"], /^launch: --nnodes: MIN must be at least 1 in --nnodes MIN:MAX$/],
  [
    ["--nproc-per-node", "0x10"],
    /^launch: --nproc-per-node: expected a number, got "0x10" \(numbers are read in decimal only\)$/,
  ],
  [["--max-restarts", "0b1"], /^launch: --max-restarts: expected a number, got "0b1"/],
  // A short flag is a flag, not the script.
  [["-n", "2"], /^launch: Unknown option '-n'/],
  [
    ["--master-port", "--nproc-per-node", "2"],
    /^launch: --master-port: needs a value, but is followed by --nproc-per-node$/,
  ],
  [
    ["--log-dir", "--nnodes", "1"],
    /^launch: --log-dir: needs a value, but is followed by --nnodes$/,
  ],
];

Deno.test("launch exits 2 naming the flag for bad flags", async (t) => {
  for (const [flags, message] of BAD_FLAGS) {
    await t.step(flags.join(" "), async () => {
      const run = await runDeno({ timeoutMs: 20_000, args: [LAUNCHER, ...flags, WORKER, "env"] });
      assert.equal(run.code, 2, run.stderr);
      assertNoLeftovers(run);
      assert.match(run.stderr.split("\n")[0], message);
      assert.match(run.stderr, /usage: deno task launch/);
      assert.equal(run.stdout, "");
    });
  }
  await t.step("no script", async () => {
    const run = await runDeno({ timeoutMs: 20_000, args: [LAUNCHER, "--nproc-per-node", "2"] });
    assert.equal(run.code, 2, run.stderr);
    assert.match(run.stderr, /no script given/);
  });
});

Deno.test("launch refuses a multi-node job without DTRAIN_TOKEN", async () => {
  // runDeno drops DTRAIN_TOKEN from this process's environment.
  const run = await launch(["--nnodes", "2", "--node-rank", "0"], ["env"]);
  assert.equal(run.code, 1, run.stderr);
  assertNoLeftovers(run);
  assert.match(run.stderr, /multi-node jobs need the same secret on every node: set DTRAIN_TOKEN/);
  assert.equal(run.stdout, "", "no worker started");
});
