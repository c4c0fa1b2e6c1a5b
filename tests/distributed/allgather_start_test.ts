// All-gathers started on a native thread and waited for with a blocking call
// (ProcessGroup.allGatherStart, dt_gloo_allgather_start): the same results as the blocking
// all-gather, collectives issued behind one run after it, nothing left running after the wait, and
// a missing or killed rank is named within the timeout.
import assert from "node:assert/strict";
import { allReduce, DistError, initProcessGroup } from "../../src/distributed/mod.ts";
import { destroyProcessGroup } from "../../src/distributed/mod.ts";
import { full } from "../../src/tensor/creation.ts";
import { allocatedBytes } from "../../src/tensor/storage.ts";
import { assertAllOk, freePort, type RankProcess, runRanks } from "../_harness/ranks.ts";
import { input, PAST_INLINE_LENGTH, reduce, SMALL_LENGTH } from "./workers/_data.ts";

const worker = new URL("./workers/allgather_start.ts", import.meta.url);

function invalid(message: string) {
  return (e: unknown) => e instanceof DistError && e.code === "invalid" && e.message === message;
}

// The default backend, then shared memory explicitly (csrc/shm/work.cc), whose blocking and
// started gathers take their turns in the transport's issue queue.
for (const [size, shm] of [[2, false], [3, false], [3, true]] as const) {
  const over = shm ? " over shared memory (DTRAIN_SHM=1)" : "";
  Deno.test(`allGatherStart across ${size} ranks${over} equals the blocking all-gather, orders what is issued behind it, and leaves no thread running`, async () => {
    const runs = await runRanks({
      worker,
      worldSize: size,
      timeoutMs: 60_000,
      env: { MODE: "equal", ...(shm ? { DTRAIN_SHM: "1" } : {}) },
    });
    assertAllOk(runs);
    if (shm) assert.ok(runs.every((r) => r.result!.backend === "shm"), "every rank uses shm");
    const ranks = runs.map((r) => r.rank);
    const gathered = (n: number, dtype: "f32" | "i32", salt: number) =>
      ranks.flatMap((r) => Array.from(input(r, n, dtype, salt)));
    for (const run of runs) {
      const results = run.result!.results as Record<string, number[]>;
      const what = `rank ${run.rank}`;
      for (const n of [SMALL_LENGTH, PAST_INLINE_LENGTH]) {
        for (const dtype of ["f32", "i32"] as const) {
          const want = gathered(n, dtype, 700);
          const key = `${dtype}/${n}`;
          assert.deepEqual(results[`${key}/blocking`], want, `${what} blocking ${key}`);
          assert.deepEqual(results[`${key}/flat`], want, `${what} started, flat, ${key}`);
          assert.deepEqual(results[`${key}/list`], want, `${what} started, per rank, ${key}`);
        }
      }
      assert.deepEqual(results.behindStarted, gathered(SMALL_LENGTH, "f32", 800), what);
      const sum = reduce(ranks.map((r) => input(r, 1001, "f32", 801)), "sum", "f32");
      assert.deepEqual(results.allReduceBehind, sum, `${what}: the all-reduce issued behind`);
      assert.deepEqual(results.blockingBehind, gathered(SMALL_LENGTH, "f32", 802), what);
      assert.deepEqual(results.late, gathered(PAST_INLINE_LENGTH, "f32", 803), what);
      // A thread the runtime starts lazily (a V8 helper) may appear in one round and stay; a
      // started gather that leaks its thread adds one in every round (4 here).
      const counts = run.result!.threadCounts as number[][];
      const grown = counts.filter(([before, after]) => after > before).length;
      assert.ok(grown <= 1, `${what}: threads grew across ${grown} started gathers: ${counts}`);
      const total = counts[counts.length - 1][1] - counts[0][0];
      assert.ok(total <= 1, `${what}: ${total} more threads after the started gathers`);
    }
    // The start does not wait for the collective: rank 0's returned before rank 1 even called its
    // own (300 ms late), and rank 0's wait lasted until rank 1 had joined.
    type Times = { calledAt: number; returnedAt: number; waitedAt: number };
    const [t0, t1] = runs.map((r) => r.result!.times as Times);
    assert.ok(
      t0.returnedAt < t1.calledAt,
      `rank 0's start returned ${t0.returnedAt - t1.calledAt} ms after rank 1 joined`,
    );
    assert.ok(t0.waitedAt >= t1.calledAt, "rank 0's wait returned before rank 1 joined");
  });
}

/** Runs 3 ranks where rank 2 never joins the started gather; `kill` SIGKILLs it instead. */
async function absent(kill: boolean, timeoutMs: number) {
  const reported = new Set<number>();
  const runs = await runRanks({
    worker,
    worldSize: 3,
    timeoutMs: 30_000,
    env: { MODE: "absent", ABSENT_RANK: "2", TEST_TIMEOUT_MS: String(timeoutMs) },
    onLine: (rank: number, line: string, procs: RankProcess[]) => {
      const victim = procs.find((p) => p.rank === 2)!;
      if (kill && rank === 2 && line === "absent") victim.child.kill("SIGKILL");
      if (rank !== 2 && line.startsWith("waited")) reported.add(rank);
      // Once both others have reported, the absent rank has served its purpose.
      if (reported.size === 2 && !victim.exited) victim.child.kill("SIGKILL");
    },
  });
  return runs.slice(0, 2).map((run) => {
    assert.equal(run.code, 1, `rank ${run.rank}: ${run.stderr}`);
    const waited = Number(/^waited (\d+)$/m.exec(run.stdout)?.[1]);
    return { run, error: String(run.result?.error), code: run.result?.code, waited };
  });
}

Deno.test("a started all-gather that a rank never joins times out on the others, naming it", async () => {
  for (const { run, error, code, waited } of await absent(false, 1500)) {
    assert.equal(code, "timeout", `rank ${run.rank}: ${error}`);
    assert.match(error, /^allGather \(op #1\): timed out after 1500 ms waiting for rank 2 to join/);
    assert.ok(waited < 1500 + 2000, `rank ${run.rank} waited ${waited} ms`);
  }
});

Deno.test("a rank killed while the others wait for a started all-gather is named at once", async () => {
  for (const { run, error, code, waited } of await absent(true, 20_000)) {
    assert.equal(code, "peer", `rank ${run.rank}: ${error}`);
    // Gloo names the connection it lost (perhaps the other survivor's, if that one exited
    // first); shared memory (the default on one host; DTRAIN_SHM=0 turns it off) the process it
    // watches. The worker's dist.diagnoseError then adds the store's verdict: rank 2, on both.
    const named = Deno.env.get("DTRAIN_SHM") !== "0"
      ? /rank 2 died/
      : /connection to rank \d failed/;
    assert.match(error, new RegExp(`^allGather \\(op #1\\): ${named.source}`));
    assert.match(error, /; rank 2 died \(left the store without reporting an error\)$/, error);
    assert.ok(waited < 10_000, `rank ${run.rank} waited ${waited} ms (timeout 20 s)`);
  }
});

Deno.test("allGatherStart in one process: refuses while collectives are queued, validates like allGather, holds its tensors until the wait", async () => {
  const group = await initProcessGroup({
    initMethod: `tcp://127.0.0.1:${freePort()}`,
    rank: 0,
    worldSize: 1,
    timeoutMs: 5000,
  });
  try {
    assert.equal(group.canStartAllGather, true);
    const x = full([4], 3), out = full([4], 0);
    const queued = allReduce(x);
    assert.throws(
      () => group.allGatherStart(out, x),
      invalid("allGatherStart: 1 collective(s) still in flight; await them first"),
    );
    await queued;
    assert.throws(
      () => group.allGatherStart(full([3], 0), x),
      invalid(
        "allGatherStart: output has 3 elements, expected 4 (input length 4 × group size 1)",
      ),
    );
    const before = allocatedBytes();
    const mine = full([1024], 2), gathered = full([1024], 0);
    const work = group.allGatherStart(gathered, mine);
    mine.dispose();
    assert.notEqual(mine.storage.ptr, null, "the started all-gather still holds its input");
    assert.equal(work.waited, false);
    work.waitBlocking();
    assert.equal(work.waited, true);
    assert.equal(mine.storage.ptr, null, "released once waited for");
    assert.deepEqual(Array.from(gathered.toArray()), Array(1024).fill(2));
    gathered.dispose();
    assert.equal(allocatedBytes(), before);
  } finally {
    await destroyProcessGroup();
  }
});
