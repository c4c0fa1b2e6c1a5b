// An elastic 2-node job (`--nnodes 1:2`, two launchers on this host) that loses a node mid-epoch
// finishes on the other from the last snapshot, and every sample of the interrupted epoch is
// trained exactly once.
import assert from "node:assert/strict";
import { join } from "node:path";
import { freePort } from "../_harness/ranks.ts";
import { ROOT, runDeno, type RunResult, withTempDir } from "../launch/_processes.ts";
import { HOOKED_MAIN, readSaved, SMALL_JOB, snapshotInfo } from "./_train.ts";

/** What one DistributedSampler pass logged (tests/train/workers/train.ts). */
interface Pass {
  world: number;
  position: number;
  indices: number[];
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
    const node = (nodeRank: number, env: Record<string, string>, onLine?: (l: string) => void) =>
      runDeno({
        timeoutMs: 90_000,
        env: { DTRAIN_TOKEN: "elastic-test-token", DTRAIN_TEST_SAMPLE_LOG: samples, ...env },
        args: [
          `${ROOT}src/launch/main.ts`,
          "--nnodes",
          "1:2",
          "--node-rank",
          String(nodeRank),
          "--nproc-per-node",
          "2",
          "--master-port",
          String(port),
          "--max-restarts",
          "1",
          HOOKED_MAIN,
          ...job,
        ],
        onLine: (line, running) => {
          onLine?.(line);
          if (nodeRank === 1 && /\] stalled at /.test(line)) running.kill("SIGKILL");
        },
      });
    const [a, b]: RunResult[] = await Promise.all([
      node(0, {}),
      // Stalls only in the first round.
      node(1, { DTRAIN_TEST_STALL_AT: "1:1024" }),
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
