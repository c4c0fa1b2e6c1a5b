// Profiles checked up front and written once: `--profile` and DTRAIN_PROFILE naming a missing
// folder or a read-only filesystem exit 2 naming the path before any process starts, and under
// the launcher the merged trace (both ranks' events) is what stays, not the launcher's own.
import assert from "node:assert/strict";
import { ROOT, runDeno, withTempDir } from "../_harness/processes.ts";
import { freePort } from "../_harness/ranks.ts";
import { SMALL_JOB, train } from "../train/_train.ts";
import type { TraceEvent } from "../../src/profile/tracer.ts";

const LAUNCHER = `${ROOT}src/launch/main.ts`;

/** A rank's script: one span, then exit (its timeline is written at exit). */
const SPAN_SCRIPT = `import { span } from "${ROOT}src/profile/tracer.ts";
span("forward", "compute", () => 1);
console.log("traced");
`;

Deno.test("DTRAIN_PROFILE under the launcher with 2 processes leaves the merged trace of both ranks", async () => {
  await withTempDir("dtrain_profile_", async (dir) => {
    await Deno.writeTextFile(`${dir}/span.ts`, SPAN_SCRIPT);
    const path = `${dir}/trace.json`;
    const run = await runDeno({
      timeoutMs: 30_000,
      args: [
        LAUNCHER,
        ...["--nproc-per-node", "2", "--master-port", String(freePort())],
        ...["--log-dir", `${dir}/logs`, `${dir}/span.ts`],
      ],
      env: { DTRAIN_PROFILE: path },
    });
    assert.equal(run.code, 0, run.stderr);
    assert.deepEqual(run.leftovers, []);
    assert.deepEqual((await Array.fromAsync(Deno.readDir(dir))).map((e) => e.name).sort(), [
      "logs",
      "span.ts",
      "trace.json",
    ]);
    const events = (JSON.parse(await Deno.readTextFile(path)) as { traceEvents: TraceEvent[] })
      .traceEvents;
    const tracks = events.filter((e) => e.name === "process_name").map((e) => e.args?.name);
    assert.deepEqual(tracks, ["rank 0", "rank 1"]);
    const spans = events.filter((e) => e.ph === "X").map((e) => `${e.pid}:${e.name}`);
    assert.deepEqual(spans, ["0:forward", "1:forward"]);
  });
});

/** Runs `fn` with a read-only filesystem mounted at `dir/ro`, unmounted afterwards. */
async function withReadOnlyMount(dir: string, fn: (ro: string) => Promise<void>): Promise<void> {
  const ro = `${dir}/ro`;
  await Deno.mkdir(ro);
  const mount = await new Deno.Command("mount", {
    args: ["-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", ro],
    stderr: "piped",
  }).output();
  assert.ok(mount.success, `mount: ${new TextDecoder().decode(mount.stderr)}`);
  try {
    await fn(ro);
  } finally {
    await new Deno.Command("umount", { args: [ro] }).output();
  }
}

/** Where a trace cannot go, and how the refusal names it. */
function unwritablePaths(dir: string, ro: string): [string, string, RegExp][] {
  return [
    [
      "a missing folder",
      `${dir}/missing/trace.json`,
      new RegExp(
        `cannot write the trace ${dir}/missing/trace\\.json: its folder ${dir}/missing does not exist`,
      ),
    ],
    [
      "a read-only filesystem",
      `${ro}/trace.json`,
      new RegExp(
        `cannot write the trace ${ro}/trace\\.json: its folder ${ro} does not take new files \\(Read-only file system`,
      ),
    ],
    ["a folder", dir, new RegExp(`cannot write the trace ${dir}: it is a folder`)],
  ];
}

Deno.test({
  name:
    "train --profile and DTRAIN_PROFILE where no trace can be written exit 2 before any process starts",
  ignore: Deno.uid() !== 0, // mounting the read-only filesystem needs root
  fn: () =>
    withTempDir("dtrain_profile_", (dir) =>
      withReadOnlyMount(dir, async (ro) => {
        const job = [...SMALL_JOB, "--snapshot", `${dir}/run/snapshot.safetensors`];
        for (const [what, path, message] of unwritablePaths(dir, ro)) {
          const runs = [
            ["--profile", await train([...job, "--profile", path], { timeoutMs: 20_000 })],
            ["DTRAIN_PROFILE", await train(job, { env: { DTRAIN_PROFILE: path } })],
          ] as const;
          for (const [how, run] of runs) {
            assert.equal(run.code, 2, `${how} ${what}: ${run.stderr}`);
            const field = how === "--profile" ? "--profile" : "DTRAIN_PROFILE";
            assert.match(run.stderr, new RegExp(`^train: ${field}: ${message.source}`), what);
            assert.equal(run.stderr.match(/^train: /gm)?.length, 1, run.stderr);
            assert.doesNotMatch(run.stderr, /no trace written|^\s+at /m, "one message");
            assert.equal(run.stdout, "");
            assert.deepEqual(run.leftovers, []);
            assert.deepEqual(run.tempEntries, [], "no launcher log folder is created");
          }
        }
        assert.deepEqual(
          (await Array.fromAsync(Deno.readDir(dir))).map((e) => e.name),
          ["ro"],
          "no run folder, log or trace is created",
        );
      })),
});

Deno.test({
  name:
    "the launcher with a DTRAIN_PROFILE where no trace can be written exits 2 starting no worker",
  ignore: Deno.uid() !== 0,
  fn: () =>
    withTempDir("dtrain_profile_", (dir) =>
      withReadOnlyMount(dir, async (ro) => {
        await Deno.writeTextFile(`${dir}/span.ts`, SPAN_SCRIPT);
        for (const [what, path, message] of unwritablePaths(dir, ro)) {
          const run = await runDeno({
            timeoutMs: 20_000,
            args: [LAUNCHER, "--nproc-per-node", "2", `${dir}/span.ts`],
            env: { DTRAIN_PROFILE: path },
          });
          assert.equal(run.code, 2, `${what}: ${run.stderr}`);
          assert.match(run.stderr, new RegExp(`^launch: DTRAIN_PROFILE: ${message.source}.*\n$`));
          assert.equal(run.stdout, "", "no worker ran");
          assert.deepEqual(run.tempEntries, [], "no launcher log folder is created");
        }
      })),
});
