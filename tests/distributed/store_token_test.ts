// The job token's strength rule (src/distributed/store/token.ts) at every entry point: the store server,
// the store client, the launcher on each node, and the train job. A weak token is refused with
// exit 2 before anything starts wherever other hosts could reach the store; a loopback store of a
// single-node job keeps accepting short ones.
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { DistError } from "../../src/distributed/errors.ts";
import { StoreClient } from "../../src/distributed/store/client.ts";
import { StoreServer } from "../../src/distributed/store/server.ts";
import { isLoopback } from "../../src/distributed/store/token.ts";
import { describe, ROOT, runDeno, type RunResult } from "../_harness/processes.ts";
import { freePort } from "../_harness/ranks.ts";

const WORKER = fileURLToPath(new URL("../launch/workers/worker.ts", import.meta.url));
const STRONG = "0123456789abcdef0123456789abcdef"; // 32 bytes: the shortest a reachable store takes
const WEAK = STRONG.slice(1); // 31 bytes
const RULE = "so it must be at least 32 bytes of a random value " +
  "(128 bits as hex digits: `openssl rand -hex 16` or longer)";

const invalid = (message: string) => (e: unknown) =>
  e instanceof DistError && e.code === "invalid" && e.message === message;

Deno.test("isLoopback: 127.0.0.0/8, ::1 and localhost only", () => {
  for (const h of ["127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost", "::ffff:127.0.0.1"]) {
    assert.equal(isLoopback(h), true, h);
  }
  for (const h of ["0.0.0.0", "::", "10.0.0.1", "128.0.0.1", "127.0.0.1.example.com", "node0"]) {
    assert.equal(isLoopback(h), false, h);
  }
});

Deno.test("StoreServer.listen: a reachable store needs 32 bytes; any store refuses empty or over 1024", async () => {
  assert.throws(
    () => StoreServer.listen({ hostname: "0.0.0.0", port: 0, token: WEAK }),
    invalid(
      "store on 0.0.0.0:0: the job token (DTRAIN_TOKEN) is 31 bytes; the store address 0.0.0.0 " +
        `is not loopback, ${RULE}`,
    ),
  );
  assert.throws(
    () => StoreServer.listen({ hostname: "127.0.0.1", port: 0, token: "x".repeat(1025) }),
    invalid(
      "store on 127.0.0.1:0: the job token (DTRAIN_TOKEN) is 1025 bytes, over the limit of 1024",
    ),
  );
  assert.throws(
    () => StoreServer.listen({ hostname: "127.0.0.1", port: 0, token: "" }),
    invalid("store on 127.0.0.1:0: the job token (DTRAIN_TOKEN) is empty"),
  );
  // Bytes, not characters: 11 three-byte characters are 33 bytes.
  await StoreServer.listen({ hostname: "0.0.0.0", port: 0, token: "€".repeat(11) }).close();
  await StoreServer.listen({ hostname: "0.0.0.0", port: 0, token: STRONG }).close();
  await using loopback = StoreServer.listen({ hostname: "127.0.0.1", port: 0, token: "t" });
  using client = await StoreClient.connect({
    hostname: "127.0.0.1",
    port: loopback.port,
    token: "t",
    timeoutMs: 5000,
  });
  await client.set("short tokens", "work on loopback");
});

Deno.test("StoreClient.connect: refuses a weak token for a store that is not on loopback, before connecting", async () => {
  // 192.0.2.0/24 is reserved for documentation: a connection attempt there would hang.
  const started = performance.now();
  await assert.rejects(
    StoreClient.connect({ hostname: "192.0.2.1", port: 29500, token: WEAK, timeoutMs: 60_000 }),
    invalid(
      "store connect to 192.0.2.1:29500: the job token (DTRAIN_TOKEN) is 31 bytes; the store " +
        `address 192.0.2.1 is not loopback, ${RULE}`,
    ),
  );
  assert.ok(performance.now() - started < 1000, "refused at once");
});

/** Runs the launcher with `flags` and DTRAIN_TOKEN `token` over the launcher tests' env worker. */
function launch(flags: string[], token: string): Promise<RunResult> {
  return runDeno({
    timeoutMs: 20_000,
    env: { DTRAIN_TOKEN: token },
    args: [
      `${ROOT}src/launch/main.ts`,
      "--master-port",
      String(freePort()),
      ...flags,
      WORKER,
      "env",
    ],
  });
}

function assertRefused(run: RunResult, message: string): void {
  assert.equal(run.code, 2, run.stderr);
  assert.equal(run.stderr.trim(), message);
  assert.equal(run.stdout, "", "no worker started");
  assert.deepEqual(run.leftovers, [], `left behind: ${describe(run.leftovers)}`);
}

Deno.test("launch: every node of a multi-node job refuses a token under 32 bytes with exit 2", async () => {
  for (const node of ["0", "1"]) {
    const run = await launch(["--nnodes", "2", "--node-rank", node], WEAK);
    assertRefused(
      run,
      `launch: the job token (DTRAIN_TOKEN) is 31 bytes; a multi-node job, ${RULE}`,
    );
  }
  const elastic = await launch(["--nnodes", "1:2", "--node-rank", "1"], "elastic-test-token");
  assertRefused(
    elastic,
    `launch: the job token (DTRAIN_TOKEN) is 18 bytes; a multi-node job, ${RULE}`,
  );
  const ok = await launch(["--nnodes", "2", "--node-rank", "1"], STRONG);
  assert.equal(ok.code, 0, ok.stderr);
  assert.match(ok.stdout, new RegExp(`"DTRAIN_TOKEN":"${STRONG}"`));
});

Deno.test("launch: one node refuses a token over 1024 bytes, or a weak one for a store off loopback", async () => {
  assertRefused(
    await launch([], "x".repeat(1025)),
    "launch: the job token (DTRAIN_TOKEN) is 1025 bytes, over the limit of 1024",
  );
  assertRefused(
    await launch(["--master-addr", "0.0.0.0"], "short-token"),
    "launch: the job token (DTRAIN_TOKEN) is 11 bytes; the store address 0.0.0.0 is not " +
      `loopback, ${RULE}`,
  );
  const loopback = await launch(["--nproc-per-node", "2"], "t");
  assert.equal(loopback.code, 0, loopback.stderr);
  assert.equal(loopback.stdout.match(/"DTRAIN_TOKEN":"t"/g)?.length, 2, loopback.stdout);
});

Deno.test("train: a multi-node job with a weak token exits 2 with the launcher's one line", async () => {
  const run = await runDeno({
    timeoutMs: 30_000,
    env: { DTRAIN_TOKEN: WEAK },
    args: [`${ROOT}src/train/main.ts`, "--nnodes", "2", "--node-rank", "1"],
  });
  assertRefused(
    run,
    `train: launch: the job token (DTRAIN_TOKEN) is 31 bytes; a multi-node job, ${RULE}`,
  );
});
