// Elastic join, as launchers on this host acting as nodes: a node that arrives while an elastic
// round runs is admitted at the next round (the running nodes stop at a step boundary with a
// snapshot and resume the data there at the new world size), and a node beyond MAX exits 0.
import assert from "node:assert/strict";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { freePort } from "../_harness/ranks.ts";
import {
  describe,
  NODE_TOKEN,
  ROOT,
  runDeno,
  type Running,
  runNode,
  type RunResult,
  withTempDir,
} from "../_harness/processes.ts";
import {
  assertBitIdentical,
  launchHooked,
  readSaved,
  SMALL_JOB,
  snapshotInfo,
} from "../train/_train.ts";

/** The hooked train job that can also hold its ranks before a step (workers/held_train.ts). */
const HELD_MAIN = fileURLToPath(new URL("./workers/held_train.ts", import.meta.url));

/** Runs one node's launcher (2 workers) over the held train job; `onLine` sees its output. */
function node(
  nodeRank: number,
  nnodes: string,
  port: number,
  job: string[],
  env: Record<string, string>,
  onLine?: (line: string) => void,
): Promise<RunResult> {
  const script = HELD_MAIN;
  return runNode({
    nodeRank,
    nnodes,
    port,
    script,
    job,
    env,
    onLine,
    restarts: 0,
    timeoutMs: 120_000,
  });
}

/** What one DistributedSampler pass logged (tests/train/workers/train.ts). */
interface Pass {
  world: number;
  position: number;
  indices: number[];
}

/** Fails unless the node exited 0 and left no process and no stop file behind. */
function assertClean(run: RunResult, name: string): void {
  assert.equal(run.code, 0, `node ${name} exited ${run.code} (${run.signal}):\n${run.stderr}`);
  assert.deepEqual(run.leftovers, [], `node ${name} left ${describe(run.leftovers)}`);
  assert.deepEqual(run.tempEntries.filter((e) => e.startsWith("dtrain-stop-")), [], `node ${name}`);
}

type Strategy = "ddp" | "fsdp";

/**
 * The job's state at its end, from the run folder `dir`: DDP's snapshot (model and optimizer),
 * or FSDP's gathered model.safetensors, with the progress the snapshot records.
 */
function finalState(dir: string, strategy: Strategy) {
  if (strategy === "ddp") {
    const saved = readSaved(join(dir, "snap"));
    return { tensors: saved.tensors, info: snapshotInfo(saved) };
  }
  const index = JSON.parse(Deno.readTextFileSync(join(dir, "snap", "index.json")));
  return { tensors: readSaved(join(dir, "model.safetensors")).tensors, info: index.extra };
}

for (const strategy of ["ddp", "fsdp"] as const) {
  Deno.test(`a node that arrives mid-round joins at the next round from a step-boundary snapshot, ending bit-identical to a run that grew at that step; a node beyond MAX exits 0 (${strategy})`, async () => {
    await withTempDir("dtrain_elastic_join_", async (dir) => {
      const port = freePort();
      // Under FSDP the snapshot is a folder, and the whole model is written beside it at the end.
      const run = join(dir, "run"), snapshot = join(run, "snap");
      const samples = join(dir, "samples");
      await Deno.mkdir(samples);
      const admit = join(dir, "admit"), third = join(dir, "third");
      // 2048 samples, batch 128: 8 steps an epoch on 2 ranks, 4 on 4. Round 0 (node A alone)
      // holds before step 3 until node B waits and A has asked its workers to stop; they stop
      // after step 4, at sample 1024 of epoch 0. Round 1 (A and B) holds before step 6 until the
      // third node has come and gone.
      const job = [...SMALL_JOB, "--strategy", strategy, "--epochs", "2", "--snapshot", snapshot];
      const env = {
        DTRAIN_TEST_SAMPLE_LOG: samples,
        DTRAIN_TEST_HOLD: `0:3:${admit},1:6:${third}`,
      };
      const later: { b?: Promise<RunResult>; c?: Promise<RunResult> } = {};
      // Either node's launcher may print rank 0's lines in round 1.
      const watch = (line: string): void => {
        if (/^\[rank 0\] held before step 3$/.test(line)) {
          later.b ??= node(1, "1:2", port, job, env, watch);
        }
        if (/launch: round 0: 1 node\(s\) waiting to join; stopping the workers/.test(line)) {
          Deno.writeTextFileSync(admit, "");
        }
        if (/^\[rank 0\] held before step 6$/.test(line)) {
          later.c ??= node(1, "1:2", port, job, env).finally(() =>
            Deno.writeTextFileSync(third, "")
          );
        }
      };
      const a = await node(0, "1:2", port, job, env, watch);
      // Awaited before any assertion: nothing is left running.
      const [b, c] = [await later.b, await later.c];
      assertClean(a, "A");
      assert.ok(b, `node B never started:\n${a.stderr}\n${a.stdout}`);
      assertClean(b, "B");
      assert.ok(c, `the third node never started:\n${a.stderr}\n${b.stderr}`);
      assertClean(c, "C");

      assert.match(a.stderr, /launch: round 0: node 0 of 1 \(world size 2\)/);
      assert.match(
        b.stderr,
        /launch: round 0 is under way without this node; joining the next one/,
      );
      assert.match(
        a.stderr,
        /launch: round 0 stopped at a step boundary to admit the waiting node/,
      );
      assert.match(
        a.stdout,
        /^\[rank 0\] stopped by the launcher at step 4; the snapshot resumes/m,
      );
      for (const [name, run] of [["A", a], ["B", b]] as const) {
        assert.match(run.stderr, /launch: round 1: node \d of 2 \(world size 4\)/, `node ${name}`);
        // Admitting a node is no restart.
        assert.doesNotMatch(run.stderr, /restart|failed/, `node ${name}`);
      }
      const both = a.stdout + b.stdout;
      assert.match(both, /resuming from \S+ at epoch 0, sample 1024 \(world size 4\)/);
      const done = both.match(/^\[rank 0\] (done: 2 epochs, loss [\d.]+)$/m);
      assert.ok(done, both);
      // The third node, beyond MAX, says so in one line after the launcher's usual first one.
      assert.deepEqual(c.stderr.trim().split("\n").slice(1), [
        "launch: the job already runs on its maximum of 2 nodes (--nnodes 1:2); this node is not needed",
      ]);

      // Epoch 0, the interrupted one: round 0 trained positions [0, 1024) of its order on 2 ranks
      // (rank r: positions r, r + 2, ...), round 1 the rest on 4; each sample once.
      const pass = (round: number, rank: number): Pass =>
        JSON.parse(Deno.readTextFileSync(join(samples, `a${round}_rank${rank}_e0.json`)));
      const before = [0, 1].map((r) => pass(0, r));
      const after = [0, 1, 2, 3].map((r) => pass(1, r));
      assert.ok(before.every((p) => p.world === 2 && p.position === 0));
      assert.ok(after.every((p) => p.world === 4 && p.position === 1024));
      const trained: number[] = [];
      for (let q = 0; q < 1024; q++) trained.push(before[q % 2].indices[Math.floor(q / 2)]);
      for (const p of after) trained.push(...p.indices);
      assert.deepEqual(trained.sort((x, y) => x - y), Array.from({ length: 2048 }, (_, i) => i));

      // The same growth made by hand: 4 steps on one node with --max-steps, then the rest on two.
      const reference = join(dir, "reference");
      const refJob = [...job.slice(0, -1), join(reference, "snap")];
      const first = await launchHooked(["--nproc-per-node", "2"], [...refJob, "--max-steps", "4"]);
      assertClean(first, "reference, 4 steps");
      const refPort = freePort();
      const rest = await Promise.all([0, 1].map((n) => node(n, "2", refPort, refJob, {})));
      rest.forEach((run, n) => assertClean(run, `reference ${n}`));
      assert.match(rest[0].stdout, /resuming from \S+ at epoch 0, sample 1024 \(world size 4\)/);
      assert.ok(rest[0].stdout.includes(`[rank 0] ${done[1]}`), rest[0].stdout);
      const grown = finalState(run, strategy), byHand = finalState(reference, strategy);
      assert.deepEqual(grown.info, byHand.info);
      assertBitIdentical(grown.tensors, byHand.tensors, "grown mid-epoch vs by hand");
    });
  });
}

Deno.test("a node whose --nnodes MIN:MAX differs from the job's exits 2 naming both, and the job goes on", async () => {
  const port = freePort();
  const worker = fileURLToPath(new URL("./workers/worker.ts", import.meta.url));
  const launcher = (
    nnodes: string,
    nodeRank: number,
    onLine?: (line: string, run: Running) => void,
  ) =>
    runDeno({
      timeoutMs: 60_000,
      env: { DTRAIN_TOKEN: NODE_TOKEN },
      args: [
        `${ROOT}src/launch/main.ts`,
        ...["--nnodes", nnodes, "--node-rank", String(nodeRank), "--master-port", String(port)],
        ...[worker, "wait"],
      ],
      onLine: (line, running) => onLine?.(line, running),
    });
  let other: Promise<RunResult> | undefined;
  const first = await launcher("1:2", 0, (line, running) => {
    if (!/^\[rank 0\] ready$/.test(line)) return;
    // The job is up: a node with another MAX comes, and is refused; then the job is stopped.
    other ??= launcher("1:3", 1).finally(() => running.kill("SIGTERM"));
  });
  const refused = await other;
  assert.ok(refused, `the job never came up:\n${first.stderr}`);
  assert.equal(refused.code, 2, refused.stderr);
  assert.match(
    refused.stderr,
    /launch: this node has --nnodes 1:3, but the job runs with --nnodes 1:2 \(its first node's\); give every node the same/,
  );
  assert.doesNotMatch(refused.stderr, /round/);
  assert.deepEqual(refused.leftovers, []);
  assert.doesNotMatch(first.stderr, /waiting to join/, "the refused node never waited");
  assert.equal(first.code, 143, first.stderr);
  assert.deepEqual(first.leftovers, []);
});
