// Shared-memory setup against kills, limits and strangers ([Note: unnamed segments] in
// csrc/shm/segment.cc), and the in-place all-reduce bit for bit against the staged one.
import assert from "node:assert/strict";
import { type RankResult, runRanks } from "../_harness/ranks.ts";

const worker = new URL("./workers/shm_setup.ts", import.meta.url);

/**
 * Entries of /dev/shm named after a process of the job (`dtrain-<pid>-...`), removed once
 * listed, so that a failing test leaves nothing behind either.
 */
function takeEntriesOf(pids: number[]): string[] {
  const names = [...Deno.readDirSync("/dev/shm")].map((e) => e.name).filter((n) =>
    pids.some((p) => n.startsWith(`dtrain-${p}-`))
  );
  for (const name of names) Deno.removeSync(`/dev/shm/${name}`);
  return names;
}

Deno.test("a SIGKILL at any moment of shared-memory setup, of the creating rank, another or all, leaves nothing of the job in /dev/shm", async () => {
  const deadline = performance.now() + 120_000;
  const tries: { victims: string; moment: string; delayMs: number; killed: boolean }[] = [];
  const leaks: string[] = [];
  // 12 tries: each victim pattern (0, 1, both) at both moments, most of them twice.
  for (let i = 0; i < 12 && performance.now() < deadline; i++) {
    // Rank 0 creates every segment, so a kill of rank 0 is the one that could strand them; a
    // kill of every rank at once leaves no survivor to clean up.
    const victims = i % 5 === 4 ? [0, 1] : i % 5 === 3 ? [1] : [0];
    // Right after "alloc" a shared buffer is being created and mapped (milliseconds); after
    // "init" the store rendezvous, then the group's segment.
    const moment = i % 2 === 0 ? "alloc" : "init";
    const delayMs = Math.random() * (moment === "alloc" ? 3 : 60);
    const pids: number[] = [];
    let fired = false;
    const runs = await runRanks({
      worker,
      worldSize: 2,
      timeoutMs: 30_000,
      env: { MODE: "setup", DTRAIN_SHM: "1", TEST_TIMEOUT_MS: "5000" },
      onLine: (rank, line, procs) => {
        for (const p of procs) if (!pids.includes(p.child.pid)) pids.push(p.child.pid);
        if (rank !== victims[0] || line !== moment || fired) return;
        fired = true;
        setTimeout(() => {
          for (const p of procs) if (victims.includes(p.rank) && !p.exited) p.child.kill("SIGKILL");
        }, delayMs);
      },
    });
    const killed = runs.some((r) => victims.includes(r.rank) && r.signal === "SIGKILL");
    tries.push({ victims: victims.join("+"), moment, delayMs, killed });
    leaks.push(...takeEntriesOf(runs.map((r) => r.pid)));
    for (const r of runs.filter((r) => !victims.includes(r.rank))) {
      // A survivor either finished before the kill or failed naming what it lost.
      assert.ok(r.code === 0 || r.code === 1, `rank ${r.rank} exited ${r.code}: ${r.stderr}`);
    }
  }
  assert.deepEqual(leaks, [], `left in /dev/shm: ${leaks.join(", ")}`);
  assert.ok(tries.length >= 10, `only ${tries.length} tries in the time`);
  const killed = tries.filter((t) => t.killed).length;
  assert.ok(killed >= tries.length / 2, `only ${killed} of ${tries.length} kills landed in setup`);
});

Deno.test("under a file size limit (ulimit -f) below the segment, rank 0 fails naming the limit, the others at once, and nothing is left", async () => {
  const runs = await runRanks({
    worker,
    worldSize: 2,
    timeoutMs: 30_000,
    // Deno's V8 code cache is one SQLite file in DENO_DIR that grows with every module path it
    // has compiled (every clone and worktree): past the limit, a write to it would kill the rank
    // with SIGXFSZ before dtrain's own check.
    denoFlags: ["--no-code-cache"],
    // 64 MiB: above the other files deno writes (its smaller caches), below the 256 MiB segment
    // of 2 ranks staging 64 MiB each.
    env: {
      MODE: "fsize",
      FSIZE: String(64 << 20),
      DTRAIN_SHM_SLOT_MIB: "64",
      DTRAIN_SHM: "1",
      TEST_TIMEOUT_MS: "20000",
    },
  });
  const limit = "the file size limit \\(ulimit -f, 67108864 bytes\\) is below the \\d+ bytes of " +
    "/dtrain-\\S+: raise it, or set DTRAIN_SHM=0 to use Gloo instead";
  for (const r of runs) {
    assert.equal(r.signal, null, `rank ${r.rank} died of ${r.signal}: ${r.stderr}`);
    assert.equal(r.code, 1, `rank ${r.rank}: ${r.stderr}`);
    // The others read rank 0's reason from the store, unless rank 0 (which serves the store)
    // exited first.
    const why = r.rank === 0
      ? limit
      : `rank 0 failed: ${limit}|store \\w+ .* closed the connection`;
    assert.match(String(r.result?.error), new RegExp(why), `rank ${r.rank}: ${r.stderr}`);
    assert.ok(r.elapsedMs < 15_000, `rank ${r.rank} took ${r.elapsedMs} ms (its timeout?)`);
  }
  assert.deepEqual(takeEntriesOf(runs.map((r) => r.pid)), []);
});

Deno.test("a stranger who takes every name of the job it sees in /dev/shm cannot turn the in-place all-reduce off", async () => {
  // [stop, names seen, pid of each rank]
  const shared = new Int32Array(new SharedArrayBuffer(4 * 5));
  const stranger = new Worker(new URL("./workers/shm_stranger.ts", import.meta.url), {
    type: "module",
  });
  const squatted = new Promise<string[]>((resolve) => {
    stranger.onmessage = (e: MessageEvent<string[]>) => resolve(e.data);
  });
  stranger.postMessage(shared.buffer);
  const runs: RankResult[] = [];
  try {
    // Two jobs, one after the other: each has its moments for a stranger to catch.
    for (let job = 0; job < 2; job++) {
      runs.push(
        ...await runRanks({
          worker,
          worldSize: 3,
          timeoutMs: 60_000,
          env: { MODE: "in-place", DTRAIN_SHM: "1" },
          onLine: (_rank, _line, procs) => procs.forEach((p) => (shared[2 + p.rank] = p.child.pid)),
        }),
      );
    }
  } finally {
    Atomics.store(shared, 0, 1);
    const taken = await squatted;
    stranger.terminate();
    for (const name of taken) Deno.removeSync(`/dev/shm/${name}`);
  }
  for (const r of runs) {
    assert.equal(r.code, 0, `rank ${r.rank}: ${r.stderr}`);
    assert.match(String(r.result?.file), /^\/dev\/shm\//, `rank ${r.rank}: not in shared memory`);
    assert.equal(r.result?.sum, 6, `rank ${r.rank}`);
  }
  assert.equal(Atomics.load(shared, 1), 0, "the stranger saw names of the job");
});

Deno.test("the in-place all-reduce of shared tensors equals the staged one bit for bit on 3 ranks (sum, avg)", async () => {
  const runs = await runRanks({
    worker,
    worldSize: 3,
    timeoutMs: 60_000,
    env: { MODE: "bits", DTRAIN_SHM: "1" },
  });
  for (const r of runs) {
    assert.equal(r.code, 0, `rank ${r.rank}: ${r.stderr}`);
    for (const op of ["sum", "avg"]) {
      const got = r.result?.[op] as Record<string, number | string>;
      const why = `rank ${r.rank}, ${op}: ${JSON.stringify(got)}`;
      assert.match(String(got.file), /^\/dev\/shm\//, why); // the in-place path, not a fallback
      assert.equal(got.inPlaceVsStaged, 0, why);
      assert.equal(got.stagedVsRankOrder, 0, why);
      // Summing in another order changes the bits of many elements: a rank that did would show.
      assert.ok(Number(got.reverseVsRankOrder) > 1 << 12, why);
    }
  }
});
