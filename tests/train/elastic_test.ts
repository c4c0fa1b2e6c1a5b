// Multi-node jobs as two launchers on this host: an elastic job (`--nnodes 1:2`) that loses a
// node mid-epoch finishes on the other from the last snapshot, every sample of the interrupted
// epoch trained exactly once; a static 2-node job restarts both nodes in the same round, counting
// restarts per job.
import assert from "node:assert/strict";
import { join } from "node:path";
import { freePort } from "../_harness/ranks.ts";
import { runNode, type RunResult, withTempDir } from "../_harness/processes.ts";
import { HOOKED_MAIN, readSaved, SMALL_JOB, snapshotInfo } from "./_train.ts";

/** What one DistributedSampler pass logged (tests/train/workers/train.ts). */
interface Pass {
  world: number;
  position: number;
  indices: number[];
}

/**
 * Runs one node's launcher over the hooked train job: `nnodes` as given ("1:2" or "2"), 2
 * workers, `--max-restarts` `restarts`; `onLine` sees its output and the run.
 */
function node(
  nodeRank: number,
  nnodes: string,
  port: number,
  job: string[],
  env: Record<string, string>,
  onLine?: (line: string, running: { kill(signal: Deno.Signal): void }) => void,
  restarts = 1,
): Promise<RunResult> {
  const script = HOOKED_MAIN;
  return runNode({ nodeRank, nnodes, port, script, job, env, onLine, restarts, timeoutMs: 90_000 });
}

Deno.test("an elastic 2-node job that loses a node mid-epoch finishes on the other from the last snapshot, each sample of that epoch trained once", async () => {
  await withTempDir("dtrain_elastic_", async (dir) => {
    const port = freePort();
    const snapshot = join(dir, "snap.safetensors");
    const samples = join(dir, "samples");
    await Deno.mkdir(samples);
    // 2048 samples, batch 128, 4 ranks: 4 steps an epoch; a snapshot every 2 steps. Node B
    // stalls after the snapshot at sample 1024 of the second epoch and is then SIGKILLed.
    const job = [...SMALL_JOB, "--epochs", "3", "--save-every-steps", "2", "--snapshot", snapshot];
    const log = { DTRAIN_TEST_SAMPLE_LOG: samples };
    const [a, b]: RunResult[] = await Promise.all([
      node(0, "1:2", port, job, log),
      // Stalls in the first round only, and is SIGKILLed then.
      node(1, "1:2", port, job, { ...log, DTRAIN_TEST_STALL_AT: "1:1024" }, (line, running) => {
        if (/\] stalled at /.test(line)) running.kill("SIGKILL");
      }),
    ]);
    assert.equal(b.signal, "SIGKILL", `node B was not killed:\n${b.stderr}`);
    assert.deepEqual(b.leftovers, [], "node B's workers died with it");
    assert.equal(a.code, 0, `node A:\n${a.stderr}\n${a.stdout}`);
    assert.deepEqual(a.leftovers, []);
    assert.match(a.stderr, /launch: round 0: node \d of 2 \(world size 4\)/);
    assert.match(
      a.stderr,
      /launch: round 0 failed \(.*\); restarting with the nodes that are up \(restart 1\/1 of the job\)/,
    );
    assert.match(a.stderr, /launch: round 1: node 0 of 1 \(world size 2\)/);
    assert.match(a.stdout, /resuming from .* at epoch 1, sample 1024 \(world size 2\)/);
    assert.match(a.stdout, /done: 3 epochs/);
    assert.equal(snapshotInfo(readSaved(snapshot)).epochsRun, 3);

    // The interrupted epoch (index 1): round 0 trained positions [0, 1024) of its order on 4
    // ranks (rank r: positions r, r + 4, ...); round 1 the rest on 2 ranks.
    const pass = (attempt: number, rank: number): Pass =>
      JSON.parse(Deno.readTextFileSync(join(samples, `a${attempt}_rank${rank}_e1.json`)));
    const before = [0, 1, 2, 3].map((r) => pass(0, r));
    const after = [0, 1].map((r) => pass(1, r));
    assert.ok(before.every((p) => p.world === 4 && p.position === 0));
    assert.ok(after.every((p) => p.world === 2 && p.position === 1024));
    const trained: number[] = [];
    for (let q = 0; q < 1024; q++) trained.push(before[q % 4].indices[Math.floor(q / 4)]);
    for (const p of after) trained.push(...p.indices);
    assert.equal(trained.length, 2048);
    assert.deepEqual(trained.sort((x, y) => x - y), Array.from({ length: 2048 }, (_, i) => i));
  });
});

Deno.test("a static 2-node job restarts both nodes in the same round and counts restarts per job", async () => {
  await withTempDir("dtrain_static_restart_", async (dir) => {
    const port = freePort();
    const job = [...SMALL_JOB, "--epochs", "2", "--snapshot", join(dir, "snap.safetensors")];
    // Rank 2, on node 1, dies before its 3rd step in the first round.
    const crash = { DTRAIN_TEST_CRASH_RANK: "2", DTRAIN_TEST_CRASH_AT_STEP: "2" };
    const runs = await Promise.all([0, 1].map((n) => node(n, "2", port, job, crash)));
    for (const [n, run] of runs.entries()) {
      assert.equal(run.code, 0, `node ${n}:\n${run.stderr}`);
      assert.deepEqual(run.leftovers, []);
      assert.match(run.stderr, new RegExp(`launch: round 1: node ${n} of 2 \\(world size 4\\)`));
      assert.match(run.stderr, /restart 1\/1 of the job/);
    }
    assert.match(runs[1].stderr, /round 0 failed \(.*node 1: rank 2 was killed by SIGKILL\)/);
    assert.match(runs[0].stdout, /done: 2 epochs/);
  });
});

Deno.test("a node that comes back joins an elastic job at its next restart, at the full world size again", async () => {
  await withTempDir("dtrain_elastic_rejoin_", async (dir) => {
    const port = freePort();
    const go = join(dir, "go");
    const job = [
      ...SMALL_JOB,
      ...["--epochs", "3", "--save-every-steps", "2", "--snapshot", join(dir, "snap.safetensors")],
    ];
    const comeback: { run?: Promise<RunResult> } = {};
    const startComeback = () => {
      comeback.run ??= node(1, "1:2", port, job, {}, (line) => {
        // Once it waits for the next round, node A's rank 1 may fail and make one.
        if (/round 1 is under way without this node/.test(line)) Deno.writeTextFileSync(go, "");
      }, 2);
    };
    const [a, lost] = await Promise.all([
      // Node A: in round 1 (alone), its rank 1 dies once node B is back and waiting, before its
      // first step: B's waiting asks the round to stop at a step boundary, which it never reaches.
      node(0, "1:2", port, job, {
        DTRAIN_TEST_CRASH_RANK: "1",
        DTRAIN_TEST_CRASH_ATTEMPT: "1",
        DTRAIN_TEST_CRASH_AT_STEP: "0",
        DTRAIN_TEST_CRASH_AFTER_FILE: go,
      }, (line) => {
        if (/launch: round 1: node 0 of 1/.test(line)) startComeback();
      }, 2),
      // Node B: lost mid-epoch in round 0.
      node(1, "1:2", port, job, { DTRAIN_TEST_STALL_AT: "0:1024" }, (line, running) => {
        if (/\] stalled at /.test(line)) running.kill("SIGKILL");
      }, 2),
    ]);
    const back = await comeback.run; // awaited before any assertion: nothing is left running
    assert.equal(lost.signal, "SIGKILL");
    assert.ok(back, `node A never ran round 1 alone:\n${a.stderr}`);
    for (const [name, run] of [["A", a], ["B (back)", back]] as const) {
      assert.equal(run.code, 0, `node ${name}:\n${run.stderr}`);
      assert.deepEqual(run.leftovers, []);
      assert.match(run.stderr, /launch: round 2: node \d of 2 \(world size 4\)/, `node ${name}`);
    }
    assert.match(a.stderr, /restart 2\/2 of the job/);
    assert.match(a.stdout + back.stdout, /\[rank 0\] done: 3 epochs/);
  });
});
