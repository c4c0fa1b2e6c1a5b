// The shared-memory backend against Gloo on the same ranks, its fault behaviour, and what it
// leaves in /dev/shm: nothing, even after a rank is SIGKILLed.
import assert from "node:assert/strict";
import { runRanks } from "../_harness/ranks.ts";

const worker = new URL("./workers/shm.ts", import.meta.url);

/** Our segments now in /dev/shm. */
function segments(): string[] {
  return [...Deno.readDirSync("/dev/shm")].map((e) => e.name).filter((n) =>
    n.startsWith("dtrain-")
  );
}

for (const worldSize of [2, 3]) {
  Deno.test(`shared-memory collectives across ${worldSize} ranks equal Gloo's (i32 exactly, f32 to 1e-6)`, async () => {
    const runs = await runRanks({
      worker,
      worldSize,
      timeoutMs: 90_000,
      env: { MODE: "compare", DTRAIN_SHM: "1" },
    });
    for (const r of runs) {
      assert.equal(r.code, 0, `rank ${r.rank}: ${r.stderr}`);
      assert.deepEqual(r.result?.backends, ["shm", "gloo"], `rank ${r.rank}`);
      const worst = r.result?.worst as { f32: number; i32: number };
      assert.equal(worst.i32, 0, `rank ${r.rank}: i32 results differ`);
      assert.ok(worst.f32 <= 1e-6, `rank ${r.rank}: f32 results differ by ${worst.f32}`);
      assert.ok(Number(r.result?.compared) >= 25, `rank ${r.rank}: ${r.result?.compared} compared`);
    }
  });
}

const twoHosts = (rank: number) => ({ DTRAIN_SHM_HOST: rank < 2 ? "host-a" : "host-b" });
for (
  const [setting, worldSize, env, backend] of [
    // An empty DTRAIN_SHM is the default even when the suite runs with DTRAIN_SHM=0.
    ["on one host by default", 2, () => ({ DTRAIN_SHM: "" }), "shm"],
    ["on one host with DTRAIN_SHM=0", 2, () => ({ DTRAIN_SHM: "0" }), "gloo"],
    ["on two hosts by default", 4, (r: number) => ({ ...twoHosts(r), DTRAIN_SHM: "" }), "shm+gloo"],
    [
      "on two hosts with one rank each",
      2,
      (r: number) => ({ DTRAIN_SHM_HOST: r < 1 ? "host-a" : "host-b", DTRAIN_SHM: "" }),
      "gloo",
    ],
    [
      "on two hosts with DTRAIN_SHM=1",
      4,
      (r: number) => ({ ...twoHosts(r), DTRAIN_SHM: "1" }),
      "shm+gloo",
    ],
  ] as const
) {
  Deno.test(`${setting}, ranks use ${backend}`, async () => {
    const runs = await runRanks({
      worker,
      worldSize,
      timeoutMs: 30_000,
      env: (rank) => ({ MODE: "group", ...env(rank) }),
    });
    for (const r of runs) {
      const why = `rank ${r.rank}: ${JSON.stringify(r.result)} ${r.stderr}`;
      assert.equal(r.result?.world, backend, why);
      assert.equal(r.result?.backend, backend, why);
    }
  });
}

Deno.test('"auto" reduces host tensors over shared memory on one host', async () => {
  const runs = await runRanks({
    worker,
    worldSize: 3,
    timeoutMs: 30_000,
    env: { MODE: "auto", DTRAIN_SHM: "" },
  });
  for (const r of runs) {
    const why = `rank ${r.rank}: ${JSON.stringify(r.result)} ${r.stderr}`;
    assert.equal(r.code, 0, why);
    assert.equal(r.result?.backend, "auto", why);
    assert.equal(r.result?.shared, true, why);
    assert.equal(r.result?.sum, 6, why);
  }
});

for (const mode of ["loop", "shared-loop"]) {
  Deno.test(`a SIGKILLed rank leaves no segment in /dev/shm, and the survivor names it (${mode === "loop" ? "staged" : "in place"})`, async () => {
    const before = new Set(segments());
    let mapped: string[] | null = null;
    const runs = await runRanks({
      worker,
      worldSize: 2,
      timeoutMs: 30_000,
      env: { MODE: mode, TEST_TIMEOUT_MS: "5000", DTRAIN_SHM: "1" },
      onLine: (rank, line, procs) => {
        if (rank === 1 && line === "looping" && mapped === null) {
          // Every rank mapped the segment before the first collective, so its name is gone
          // already: a SIGKILL now cannot leak it.
          mapped = segments().filter((n) => !before.has(n));
          procs.find((p) => p.rank === 1)!.child.kill("SIGKILL");
        }
      },
    });
    assert.deepEqual(mapped, [], "a segment name was still linked while the ranks ran");
    assert.deepEqual(segments().filter((n) => !before.has(n)), [], "segments left behind");
    const survivor = runs[0];
    assert.equal(survivor.code, 1, survivor.stderr);
    assert.match(String(survivor.result?.error), /^allReduce \(op #\d+\): rank 1 died/);
    assert.ok(survivor.elapsedMs - runs[1].elapsedMs < 2500, "the survivor took its timeout");
  });
}

// faults_test.ts runs its scenarios on the default backend (shared memory, on one host); these
// run two of them on both backends and require the same outcome word for word.
const faults = new URL("./workers/faults.ts", import.meta.url);

Deno.test("mismatched collectives and a rank that skips one fail the same way over shared memory and Gloo", async () => {
  const outcomes = [];
  for (const shm of ["1", "0"]) {
    const mismatch = await runRanks({
      worker: faults,
      worldSize: 3,
      timeoutMs: 30_000,
      env: { MODE: "mismatch", DTRAIN_SHM: shm },
    });
    const hang = await runRanks({
      worker: faults,
      worldSize: 3,
      timeoutMs: 30_000,
      env: { MODE: "hang", HANG_RANK: "2", TEST_TIMEOUT_MS: "1000", DTRAIN_SHM: shm },
    });
    outcomes.push({
      mismatch: mismatch.map((r) => r.result?.errors),
      hang: hang.filter((r) => r.rank !== 2).map((r) => String(r.result?.error).replace(/; .*/, "") // the diagnosis after ";" polls the store
      ),
    });
  }
  assert.equal(outcomes[0].mismatch.length, 3);
  assert.ok(outcomes[0].mismatch.every((e) => Array.isArray(e) && e.length === 5));
  assert.deepEqual(outcomes[0], outcomes[1]);
});

Deno.test("across two hosts (DTRAIN_SHM_HOST), a SIGKILLed rank is named by the ranks of both hosts", async () => {
  const timeoutMs = 20_000;
  let killedAt = 0;
  const runs = await runRanks({
    worker,
    worldSize: 4,
    timeoutMs: 60_000,
    env: (rank) => ({
      MODE: "loop",
      TEST_TIMEOUT_MS: String(timeoutMs),
      DTRAIN_SHM: "1",
      DTRAIN_SHM_HOST: rank < 2 ? "host-a" : "host-b",
    }),
    onLine: (rank, line, procs) => {
      if (rank === 3 && line === "looping" && killedAt === 0) {
        killedAt = performance.now();
        procs.find((p) => p.rank === 3)!.child.kill("SIGKILL");
      }
    },
  });
  assert.ok(killedAt > 0, "rank 3 never reached its loop");
  for (const r of runs.filter((r) => r.rank !== 3)) {
    assert.equal(r.code, 1, `rank ${r.rank}: ${r.stderr}`);
    assert.match(
      String(r.result?.error),
      /^(allReduce|broadcast) \(op #\d+\): /,
      `rank ${r.rank}: ${r.result?.error}`,
    );
    assert.match(String(r.result?.error), /rank 3 died/, `rank ${r.rank}: ${r.result?.error}`);
    // Rank 1 waits for its host's leader, which learns of the death through Gloo and fails the
    // host's shared-memory group at once: nobody waits for the 20 s timeout.
    assert.ok(r.elapsedMs < runs[3].elapsedMs + 8000, `rank ${r.rank} took ${r.elapsedMs} ms`);
  }
  const starts = runs.map((r) => r.stdout.split("\n").find((l) => l.includes("backend")));
  assert.ok(starts.every((l) => l?.includes('"shm+gloo"')), starts.join("\n"));
});

for (const worldSize of [2, 3]) {
  Deno.test(`emptyShared tensors across ${worldSize} ranks all-reduce in place to Gloo's results, and leave no segment`, async () => {
    const before = new Set(segments());
    const runs = await runRanks({
      worker,
      worldSize,
      timeoutMs: 90_000,
      env: { MODE: "shared", DTRAIN_SHM: "1" },
    });
    for (const r of runs) {
      assert.equal(r.code, 0, `rank ${r.rank}: ${r.stderr}`);
      assert.equal(r.result?.backend, "shm");
      const worst = r.result?.worst as { f32: number; i32: number };
      assert.equal(worst.i32, 0, `rank ${r.rank}: i32 results differ`);
      assert.ok(worst.f32 <= 1e-6, `rank ${r.rank}: f32 results differ by ${worst.f32}`);
      assert.equal(r.result?.compared, 15);
      assert.equal(r.result?.zeroFilled, true);
      assert.deepEqual(r.result?.plainSum, Array(5).fill(worldSize));
      assert.equal(r.result?.keptAfterDestroy, true);
      // No buffer ever had a name in /dev/shm, nor has one while the ranks still run.
      assert.deepEqual((r.result?.left as string[]).filter((n) => !before.has(n)), []);
    }
  });
}

Deno.test("an all-reduce of a shared tensor on one rank and a private one on another fails on every rank, and the group goes on", async () => {
  const runs = await runRanks({
    worker,
    worldSize: 2,
    timeoutMs: 30_000,
    env: { MODE: "shared-mismatch", DTRAIN_SHM: "1" },
  });
  for (const r of runs) {
    assert.equal(r.code, 0, `rank ${r.rank}: ${r.stderr}`);
    assert.deepEqual(r.result?.errors, [
      "allReduce (op #3): rank 1 passed a buffer of its own, rank 0 byte 0 of shared buffer #0 " +
      "(a shared buffer is reduced in place only when every rank passes the same one)",
    ]);
    assert.equal(r.result?.after, 2);
  }
});

Deno.test("a rank that dies before emptyShared is named, and its buffer's name is not left in /dev/shm", async () => {
  const before = new Set(segments());
  const runs = await runRanks({
    worker,
    worldSize: 2,
    timeoutMs: 30_000,
    env: { MODE: "shared-dead", DTRAIN_SHM: "1", TEST_TIMEOUT_MS: "20000" },
  });
  assert.equal(runs[1].code, 3);
  assert.match(String(runs[0].result?.error), /^emptyShared \(op #\d+\): rank 1 died/);
  assert.deepEqual((runs[0].result?.left as string[]).filter((n) => !before.has(n)), []);
  assert.deepEqual(segments().filter((n) => !before.has(n)), []);
});

Deno.test("an emptyShared larger than /dev/shm fails on every rank with what to do, leaving the group usable and nothing behind", async () => {
  const before = new Set(segments());
  const runs = await runRanks({
    worker,
    worldSize: 2,
    timeoutMs: 30_000,
    env: { MODE: "shared-full", DTRAIN_SHM: "1" },
  });
  for (const r of runs) {
    assert.equal(r.code, 0, `rank ${r.rank}: ${r.stderr}`);
    assert.match(
      String(r.result?.error),
      /^internal: emptyShared: rank 0 failed: no room for \d+ bytes of \/dtrain-\S+ in \/dev\/shm \(No space left on device\): enlarge \/dev\/shm \(docker run --shm-size\), or set DTRAIN_SHM=0/,
    );
    assert.equal(r.result?.after, 2);
    assert.deepEqual((r.result?.left as string[]).filter((n) => !before.has(n)), []);
  }
});
