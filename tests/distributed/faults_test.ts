// Failures across real rank processes: a rank killed mid-loop, ranks that disagree on a
// collective, a rank that never arrives, a rank that never starts.
import assert from "node:assert/strict";
import { runRanks } from "../_harness/ranks.ts";

const worker = new URL("./workers/faults.ts", import.meta.url);
const TIMEOUT_MS = 5000;

async function exists(path: string): Promise<boolean> {
  return await Deno.stat(path).then(() => true, () => false);
}

async function killMidLoop(worldSize: number, victim: number) {
  let killedAt = 0;
  const runs = await runRanks({
    worker,
    worldSize,
    timeoutMs: 30_000,
    env: { MODE: "loop", TEST_TIMEOUT_MS: String(TIMEOUT_MS) },
    onLine: (rank, line, procs) => {
      if (rank === victim && line === "looping" && killedAt === 0) {
        killedAt = performance.now();
        procs.find((p) => p.rank === victim)!.child.kill("SIGKILL");
      }
    },
  });
  assert.ok(killedAt > 0, "the victim never reached its loop");
  return { runs, killedAt };
}

for (const [worldSize, victim] of [[3, 2], [3, 0]]) {
  Deno.test(`SIGKILL of rank ${victim} mid all-reduce makes the other ${worldSize - 1} ranks fail naming it`, async () => {
    const { runs } = await killMidLoop(worldSize, victim);
    for (const r of runs) {
      assert.equal(await exists(`/proc/${r.pid}`), false, `rank ${r.rank} is still alive`);
    }
    const survivors = runs.filter((r) => r.rank !== victim);
    for (const r of survivors) {
      assert.equal(r.code, 1, `rank ${r.rank} should fail, stderr:\n${r.stderr}`);
      const error = String(r.result?.error);
      assert.match(error, /^allReduce \(op #\d+\): /, `rank ${r.rank}: ${error}`);
      assert.match(error, new RegExp(`rank ${victim}\\b`), `rank ${r.rank}: ${error}`);
    }
    // The others notice within the timeout plus a few seconds of diagnosis and exit.
    const killed = runs.find((r) => r.rank === victim)!;
    for (const r of survivors) {
      const after = r.elapsedMs - killed.elapsedMs;
      assert.ok(after < TIMEOUT_MS + 3000, `rank ${r.rank} took ${after | 0} ms after the kill`);
    }
  });
}

for (const [victim, shared] of [[2, false], [0, false], [2, true]] as const) {
  Deno.test(`a hung rank ${victim} (SIGSTOP mid all-reduce${shared ? " of a shared tensor, in place" : ""}) is named by every other rank within the timeout + 2 s`, async () => {
    const timeoutMs = 3000;
    let stoppedAt = 0;
    const reportedAfter = new Map<number, number>();
    const runs = await runRanks({
      worker,
      worldSize: 3,
      timeoutMs: 30_000,
      env: { MODE: "loop", TEST_TIMEOUT_MS: String(timeoutMs), SHARED: shared ? "1" : "0" },
      onLine: (rank, line, procs) => {
        const victimProc = procs.find((p) => p.rank === victim)!;
        if (rank === victim && line === "looping" && stoppedAt === 0) {
          stoppedAt = performance.now();
          victimProc.child.kill("SIGSTOP");
        }
        if (rank !== victim && line.startsWith("{")) {
          reportedAfter.set(rank, performance.now() - stoppedAt);
          // Once both others have reported, the hung rank has served its purpose.
          if (reportedAfter.size === 2) victimProc.child.kill("SIGKILL");
        }
      },
    });
    assert.ok(stoppedAt > 0, "the victim never reached its loop");
    for (const r of runs.filter((r) => r.rank !== victim)) {
      assert.equal(r.code, 1, `rank ${r.rank}: ${r.stderr}`);
      const error = String(r.result?.error);
      assert.match(error, /^allReduce \(op #\d+\): /, `rank ${r.rank}: ${error}`);
      const named = victim === 0
        ? /rank 0, which hosts it, has probably died or hung/
        : new RegExp(`rank ${victim} is hung \\(still connected`);
      assert.match(error, named, `rank ${r.rank}: ${error}`);
      const after = reportedAfter.get(r.rank)!;
      assert.ok(after < timeoutMs + 2000, `rank ${r.rank} reported ${after | 0} ms after the stop`);
    }
  });
}

Deno.test("mismatched collectives raise the same fingerprint error on every rank, then the group works on", async () => {
  const runs = await runRanks({
    worker,
    worldSize: 3,
    timeoutMs: 30_000,
    env: { MODE: "mismatch", TEST_TIMEOUT_MS: String(TIMEOUT_MS) },
  });
  const expected = [
    "allReduce: rank 1 sent 2048 f32 elements, rank 0 expected 1024 (op #1)",
    "allReduce: rank 1 reduces with max, rank 0 expected sum (op #2)",
    "op #3: rank 1 called broadcast, rank 0 called allReduce",
    "allReduce: rank 1 sent 64 i32 elements, rank 0 expected 64 f32 elements (op #4)",
    "broadcast: rank 1 uses root 1, rank 0 expected root 0 (op #5)",
  ];
  for (const r of runs) {
    assert.equal(r.code, 0, `rank ${r.rank}: ${r.stderr}`);
    assert.deepEqual(r.result?.errors, expected, `rank ${r.rank}`);
    assert.equal(r.result?.after, 3, `rank ${r.rank}: the all-reduce after the mismatches`);
  }
});

Deno.test("a rank that skips a collective is named in the others' timeout error", async () => {
  const runs = await runRanks({
    worker,
    worldSize: 3,
    timeoutMs: 30_000,
    env: { MODE: "hang", HANG_RANK: "2", TEST_TIMEOUT_MS: "1500" },
  });
  for (const r of runs.filter((r) => r.rank !== 2)) {
    assert.equal(r.code, 1, `rank ${r.rank}: ${r.stderr}`);
    assert.equal(r.result?.code, "timeout");
    assert.match(
      String(r.result?.error),
      /^allReduce \(op #1\): timed out after 1500 ms waiting for rank 2 to join/,
    );
  }
});

Deno.test("a missing rank makes init time out saying how many joined", async () => {
  const runs = await runRanks({
    worker,
    worldSize: 2,
    ranks: [0],
    timeoutMs: 30_000,
    env: { MODE: "job", TEST_TIMEOUT_MS: "1000" },
  });
  assert.equal(runs[0].code, 1);
  assert.equal(
    runs[0].result?.error,
    "Timed out after 1 s waiting for clients: 1/2 joined (missing: rank 1)",
  );
});

Deno.test("the harness kills every rank of a hung job and names the hung ranks", async () => {
  const started = performance.now();
  await assert.rejects(
    runRanks({
      worker,
      worldSize: 2,
      ranks: [0],
      timeoutMs: 1500,
      env: { MODE: "job", TEST_TIMEOUT_MS: "60000" },
    }),
    /rank 0 of 2 still running after 1500 ms \(hung; killed\)/,
  );
  assert.ok(performance.now() - started < 5000);
});
