// An elastic node that dies (or hangs) right after a round admitted it, as launchers on this host
// acting as nodes: the survivor notices within 30 s (the lost node's heartbeat in the store
// stops), names the node, and re-forms the round without it; before, its workers waited out their
// 300 s rendezvous timeout and died with stack traces.
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { freePort } from "../_harness/ranks.ts";
import { runNode, type RunResult } from "../_harness/processes.ts";

/** Joins the process group, all-reduces once and exits 0 (workers/rendezvous_worker.ts). */
const WORKER = fileURLToPath(new URL("./workers/rendezvous_worker.ts", import.meta.url));

/** The most time a survivor may take to notice the dead node, as torchrun's heartbeat does. */
const NOTICE_LIMIT_MS = 30_000;

/** Runs one node's launcher (2 workers) of a `--nnodes 1:2` job that may restart once. */
function node(
  nodeRank: number,
  port: number,
  onLine: (line: string, running: { child: Deno.ChildProcess; kill(s: Deno.Signal): void }) => void,
): Promise<RunResult> {
  return runNode({
    nodeRank,
    nnodes: "1:2",
    port,
    script: WORKER,
    job: [],
    env: {},
    onLine,
    restarts: 1,
    // Without the fix the survivor's workers wait 300 s: this fails the test long before.
    timeoutMs: 120_000,
  });
}

/**
 * Starts nodes A (hosting the store) and B together, so that round 0 admits both, and sends B's
 * launcher `signal` at the first of B's lines that `killAt` matches, given B's place in the round:
 * SIGKILL (its workers die with it), or SIGSTOP (a hung node, whose store connections stay open;
 * SIGKILLed once A is done). Checks that A notices within NOTICE_LIMIT_MS naming B, and finishes
 * alone in round 1.
 */
async function survivesLoss(
  signal: "SIGKILL" | "SIGSTOP",
  killAt: (line: string, place: number) => boolean,
): Promise<void> {
  const port = freePort();
  let place = -1, pid = 0, killedAt = 0, noticedAt = 0;
  let killB = () => {};
  const [a, b] = await Promise.all([
    node(0, port, (line) => {
      if (noticedAt === 0 && /launch: round 0 failed/.test(line)) noticedAt = performance.now();
    }).finally(() => killB()),
    node(1, port, (line, running) => {
      const admitted = line.match(/^launch: round 0: node (\d) of 2 /);
      if (admitted) [place, pid] = [Number(admitted[1]), running.child.pid];
      if (killedAt === 0 && place >= 0 && killAt(line, place)) {
        running.kill(signal);
        killB = () => running.kill("SIGKILL");
        killedAt = performance.now();
      }
    }),
  ]);
  assert.equal(b.signal, "SIGKILL", `node B was not killed:\n${b.stderr}\n${b.stdout}`);
  assert.deepEqual(b.leftovers, [], "node B's workers died with it");
  assert.equal(a.code, 0, `node A:\n${a.stderr}\n${a.stdout}`);
  assert.deepEqual(a.leftovers, []);
  assert.match(a.stderr, /launch: round 0: node \d of 2 \(world size 4\)/);
  // The dead node named: its place in the round, its launcher and host.
  const dead = new RegExp(
    `launch: round 0 failed \\(node ${place} \\(launcher pid ${pid} on ${Deno.hostname()}\\) ` +
      `stopped answering: no heartbeat in the store for \\d+ s \\(killed, hung or cut off\\)\\); ` +
      `restarting with the nodes that are up \\(restart 1/1 of the job\\)`,
  );
  assert.match(a.stderr, dead);
  const noticeMs = noticedAt - killedAt;
  console.log(`node A noticed node B's ${signal} ${(noticeMs / 1000).toFixed(1)} s after the kill`);
  assert.ok(noticeMs > 0 && noticeMs < NOTICE_LIMIT_MS, `noticed after ${noticeMs} ms`);
  assert.match(a.stderr, /launch: round 1: node 0 of 1 \(world size 2\)/);
  assert.match(a.stdout, /^\[rank 0\] round 1: met the process group of world size 2$/m);
  // No rendezvous timeout, no count of who joined, no stack trace.
  assert.doesNotMatch(a.stderr + a.stdout, /Timed out|joined \(missing|^\s+at /m);
}

Deno.test("an elastic node killed right after a round admitted it is noticed within 30 s and named; the round re-forms without it", async () => {
  await survivesLoss(
    "SIGKILL",
    (line, place) => line.startsWith(`launch: round 0: node ${place} of 2 `),
  );
});

Deno.test("an elastic node killed during its workers' rendezvous is noticed within 30 s and named; the round re-forms without it", async () => {
  await survivesLoss(
    "SIGKILL",
    (line, place) => line === `[rank ${2 * place}] round 0: joining the process group`,
  );
});

Deno.test("an elastic node that hangs right after a round admitted it (its store connections open) is noticed within 30 s and named; the round re-forms without it", async () => {
  await survivesLoss(
    "SIGSTOP",
    (line, place) => line.startsWith(`launch: round 0: node ${place} of 2 `),
  );
});
