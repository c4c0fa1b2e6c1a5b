// One node needs no port: without --master-port (or with --standalone) the launcher and the train
// job host their store on a free port, so they run while another job holds torchrun's 29500; a
// busy port given explicitly is refused naming the flags that choose another.
import assert from "node:assert/strict";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { freePort } from "../_harness/ranks.ts";
import { describe, ROOT, runDeno, type RunResult, withTempDir } from "../_harness/processes.ts";
import { MULTI_NODE_PORT, parseLaunchArgs } from "../../src/launch/options.ts";
import { SMALL_JOB, train } from "../train/_train.ts";

const LAUNCHER = `${ROOT}src/launch/main.ts`;
const WORKER = fileURLToPath(new URL("./workers/worker.ts", import.meta.url));

/** Listens on 29500 for the test, as another job would; null when something else already does. */
function holdDefaultPort(): Deno.TcpListener | null {
  try {
    return Deno.listen({ hostname: "127.0.0.1", port: MULTI_NODE_PORT });
  } catch (error) {
    if (error instanceof Deno.errors.AddrInUse) return null;
    throw error;
  }
}

function assertSucceeded(run: RunResult): void {
  assert.equal(run.code, 0, `exit ${run.code}:\n${run.stderr}\n${run.stdout}`);
  assert.deepEqual(run.leftovers, [], `left behind: ${describe(run.leftovers)}`);
}

/** The MASTER_PORT every rank was given, from the launcher's prefixed JSON lines. */
function masterPorts(stdout: string): string[] {
  return [...stdout.matchAll(/^\[rank \d+\] (\{.*\})$/gm)].map((m) => JSON.parse(m[1]).MASTER_PORT);
}

Deno.test("one node runs without --master-port while 29500 is taken: the launcher, --standalone and a 2-process train job", async (t) => {
  const held = holdDefaultPort();
  try {
    if (held !== null) {
      // The port is really taken: hosting a store on it fails.
      assert.throws(() => Deno.listen({ hostname: "127.0.0.1", port: MULTI_NODE_PORT }));
    }
    for (const flags of [[], ["--standalone"]]) {
      await t.step(`launch ${flags.join(" ")}`.trim(), async () => {
        const run = await runDeno({
          timeoutMs: 30_000,
          args: [LAUNCHER, ...flags, "--nproc-per-node", "2", WORKER, "env"],
        });
        assertSucceeded(run);
        const ports = masterPorts(run.stdout);
        assert.equal(ports.length, 2, run.stdout);
        assert.equal(ports[0], ports[1], "both ranks meet on one port");
        assert.notEqual(ports[0], String(MULTI_NODE_PORT));
        assert.ok(Number(ports[0]) > 0, `MASTER_PORT ${ports[0]}`);
      });
    }
    await t.step("train --nproc-per-node 2", async () => {
      await withTempDir("dtrain_free_port_", async (dir) => {
        const snapshot = join(dir, "snap.safetensors");
        const args = [...SMALL_JOB, "--nproc-per-node", "2", "--epochs", "1"];
        const run = await train([...args, "--snapshot", snapshot], { timeoutMs: 60_000 });
        assertSucceeded(run);
        assert.match(run.stdout, /^\[rank 0\] done: 1 epochs/m);
      });
    });
  } finally {
    held?.close();
  }
});

Deno.test("a busy --master-port is refused naming --master-port and --standalone", async () => {
  using listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = listener.addr.port;
  const run = await runDeno({
    timeoutMs: 20_000,
    args: [LAUNCHER, "--master-port", String(port), WORKER, "env"],
  });
  assert.equal(run.code, 1, run.stderr);
  assert.deepEqual(run.leftovers, []);
  assert.equal(
    run.stderr.trim().split("\n").at(-1),
    `cannot host the store on 127.0.0.1:${port}: address already in use (another job or store ` +
      `is on this port?); pick another with --master-port P, or, on one node, leave ` +
      `--master-port out (or give --standalone) to take a free port`,
  );
  assert.equal(run.stdout, "", "no worker started");
});

Deno.test("--standalone refuses flags that place the store, and several nodes meet on 29500 or a given port", () => {
  const refusals: [string[], RegExp][] = [
    [["--standalone", "--nnodes", "2"], /^--standalone: .* leave out --nnodes /],
    [["--standalone", "--master-port", "1234"], /^--standalone: .* leave out --master-port /],
    [["--standalone", "--master-addr", "10.0.0.1"], /^--standalone: .* leave out --master-addr /],
    [["--standalone", "--node-rank", "1"], /^--node-rank: must be below --nnodes/],
    [["--nnodes", "2", "--master-port", "0"], /^--master-port: a multi-node job's nodes must/],
  ];
  for (const [flags, message] of refusals) {
    assert.throws(() => parseLaunchArgs([...flags, "job.ts"]), (e: Error) => {
      assert.match(e.message, message);
      return true;
    });
  }
  const port = freePort();
  const cases: [string[], number][] = [
    [[], 0],
    [["--standalone", "--nnodes", "1"], 0],
    [["--master-port", String(port)], port],
    [["--nnodes", "2"], MULTI_NODE_PORT],
    [["--nnodes", "1:2"], MULTI_NODE_PORT],
    [["--nnodes", "2", "--master-port", String(port)], port],
  ];
  for (const [flags, want] of cases) {
    const options = parseLaunchArgs([...flags, "job.ts"]);
    assert.ok(options !== "help");
    assert.equal(options.masterPort, want, flags.join(" "));
  }
});
