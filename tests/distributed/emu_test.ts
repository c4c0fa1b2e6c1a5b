// The emu backend (src/distributed/emu.ts) across 2 real rank processes, each on emu:<rank>, over
// `backend: "emu"` and over "auto": collectives against the host computation, ordered after the
// kernels queued before them; what a group refuses; DDP on a device-only group; a rank that
// skips a collective named in the timeout, a dead one named.
import assert from "node:assert/strict";
import { assertAllOk, runRanks } from "../_harness/ranks.ts";

const worker = new URL("./workers/emu.ts", import.meta.url);
const SIZE = 2;
const N = 5;

/** Rank r's input, as the worker makes it on its device. */
const input = (r: number) => Array.from({ length: N }, (_, i) => (r + 1) * (i + 1) - 3);
const ranks = Array.from({ length: SIZE }, (_, r) => r);
/** The host computation of an all-reduce of every rank's input. */
const reduce = (f: (xs: number[]) => number) =>
  input(0).map((_, i) => f(ranks.map((r) => input(r)[i])));
const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);

/** Checks what rank `rank`'s group over `backend` refused, as the worker reported it. */
function assertRefusals(backend: string, rank: number, r: Record<string, unknown>): void {
  const other = `emu:${(rank + 1) % SIZE}`;
  if (backend === "emu") {
    assert.equal(
      r.hostTensor,
      'allReduce: a tensor is on cpu, which the emu backend cannot reach; move it, or use the "auto" backend',
    );
    assert.equal(
      r.cuda,
      `allReduce: a tensor is on cuda:${rank}, which the emu backend cannot reach; move it, or use the "auto" backend`,
    );
    assert.deepEqual(r.reaches, [false, true, false]);
  } else {
    assert.equal(r.hostTensor, "ok", "auto reduces host tensors over its host communicator");
    // Without CUDA, "auto" still reaches emu, and says why a GPU tensor goes nowhere.
    assert.match(String(r.cuda), /^allReduce: a tensor is on a GPU but CUDA is not available: /);
    assert.deepEqual(r.reaches, [true, true, false]);
  }
  assert.equal(
    r.hostAndEmu,
    `allGather: tensors on emu:${rank} and in host memory in one call; move them to one`,
  );
  assert.equal(
    r.cudaAndEmu,
    `allGather: tensors on emu:${rank} and on cuda:0 in one call; move them to one device`,
  );
  assert.equal(
    r.otherDevice,
    `allReduce: a tensor is on ${other}, but this rank's emu communicator is on emu:${rank} ` +
      "(the device of its local rank); move the tensor there",
  );
}

for (const backend of ["emu", "auto"]) {
  Deno.test(`over "${backend}", collectives on emu:<rank> equal the host computation, see the kernels queued before them, and refuse what the group cannot reach`, async (t) => {
    const runs = await runRanks({
      worker,
      worldSize: SIZE,
      timeoutMs: 30_000,
      // No GPU under "auto" even on a machine with one: it must reach emu without CUDA.
      env: { MODE: "collectives", BACKEND: backend, CUDA_VISIBLE_DEVICES: "" },
    });
    assertAllOk(runs);
    const gathered = ranks.flatMap(input);
    await t.step("every collective equals the host computation", () => {
      for (const { rank, result: r } of runs) {
        const why = `rank ${rank}`;
        assert.equal(r?.backend, backend, why);
        assert.deepEqual(r?.sum, reduce(sum), why);
        assert.deepEqual(r?.avg, reduce((xs) => sum(xs) / SIZE), why);
        assert.deepEqual(r?.max, reduce((xs) => Math.max(...xs)), why);
        assert.deepEqual(r?.i32, reduce(sum), why);
        assert.deepEqual(r?.allReduceBlocking, reduce(sum), why);
        assert.deepEqual(r?.broadcast, input(1), why);
        assert.deepEqual(r?.allGather, gathered, why);
        assert.deepEqual(r?.allGatherList, ranks.map(input), why);
        assert.deepEqual(r?.allGatherBlocking, gathered, why);
        assert.deepEqual(r?.allGatherStart, gathered, why);
        // Rank q's input is (q + 1) * i over SIZE chunks; rank r keeps the sum of chunk r.
        const chunk = Array.from(
          { length: N },
          (_, i) => sum(ranks.map((q) => (q + 1) * (rank * N + i))),
        );
        assert.deepEqual(r?.reduceScatter, chunk, why);
        assert.deepEqual(r?.subgroup, [backend, reduce(sum)], why);
      }
    });
    await t.step("a collective issued right after the kernels making its input sees them", () => {
      // full(r + 1), then four queued x * 2 + 1: 16 (r + 1) + 15 on each rank, summed.
      const expected = Array(N).fill(sum(ranks.map((q) => 16 * (q + 1) + 15)));
      for (const r of runs) assert.deepEqual(r.result?.ordered, expected, `rank ${r.rank}`);
    });
    await t.step(
      "host tensors (on emu), mixed memory and another rank's device are refused",
      () => {
        for (const r of runs) assertRefusals(backend, r.rank, r.result!);
      },
    );
  });
}

Deno.test('DDP creates and steps with findUnusedParameters on a pure "emu" group', async () => {
  const runs = await runRanks({
    worker,
    worldSize: SIZE,
    timeoutMs: 30_000,
    env: { MODE: "ddp", BACKEND: "emu" },
  });
  assertAllOk(runs);
  type Grads = Record<string, number[]>;
  const steps = runs.map((r) =>
    r.result!.steps as { grads: Grads; local: Grads; devices: string[] }[]
  );
  for (let step = 0; step < 2; step++) {
    const locals = steps.map((s) => s[step].local);
    for (const rank of ranks) {
      const { grads, devices } = steps[rank][step];
      assert.deepEqual(devices, Array(4).fill(`emu:${rank}`));
      for (const name of ["used.weight", "used.bias", "gated.weight", "gated.bias"]) {
        const mine = locals.map((l) => l[name]);
        if (mine.every((g) => g === undefined)) {
          assert.equal(grads[name], undefined, `step ${step}: ${name} no rank used has no grad`);
          continue;
        }
        const length = mine.find((g) => g !== undefined)!.length;
        // The mean over ranks, a rank that did not use the parameter adding 0.
        const mean = Array.from({ length }, (_, i) => sum(mine.map((g) => g?.[i] ?? 0)) / SIZE);
        grads[name].forEach((g, i) =>
          assert.ok(Math.abs(g - mean[i]) <= 1e-6, `step ${step}, rank ${rank}, ${name}[${i}]`)
        );
      }
    }
  }
  // Step 0 used gated on rank 0 only, step 1 nowhere.
  assert.ok(steps[0][0].grads["gated.weight"] !== undefined);
  assert.equal(steps[0][1].grads["gated.weight"], undefined);
});

Deno.test('across two hosts "emu" fails at init and "auto" leaves emu memory unreachable, saying why', async () => {
  const env = (backend: string) => (rank: number) => ({
    MODE: "apart",
    BACKEND: backend,
    DTRAIN_SHM_HOST: `host-${rank}`,
  });
  const [emu, auto] = await Promise.all(
    ["emu", "auto"].map((backend) =>
      runRanks({ worker, worldSize: SIZE, timeoutMs: 30_000, env: env(backend) })
    ),
  );
  const apart = "the emu backend's transport is shared memory, and the group's members run on " +
    "more than one host";
  // Every rank fails; rank 0's message is sure to be this one (the others may lose the store
  // first, as rank 0, which hosts it, exits).
  for (const r of emu) assert.equal(r.code, 1, `rank ${r.rank}: ${r.stdout}`);
  assert.equal(emu[0].result?.error, `emu rendezvous of rank 0 (group of ${SIZE}): ${apart}`);
  assertAllOk(auto);
  for (const r of auto) {
    assert.equal(r.result?.backend, "auto");
    assert.equal(r.result?.emu, `allReduce: a tensor is on emu:${r.rank} but ${apart}`);
  }
});

Deno.test('a rank that skips an "emu" collective is named in the others\' timeout error', async () => {
  const runs = await runRanks({
    worker,
    worldSize: SIZE,
    timeoutMs: 30_000,
    env: { MODE: "skip", BACKEND: "emu", TEST_TIMEOUT_MS: "1500" },
  });
  assert.equal(runs[0].code, 1, runs[0].stderr);
  assert.equal(runs[0].result?.code, "timeout");
  assert.match(
    String(runs[0].result?.error),
    /^allReduce \(op #1\): timed out after 1500 ms waiting for rank 1 to join; rank 1 is hung/,
  );
});

Deno.test('SIGKILL of a rank mid "emu" all-reduce makes the other fail naming it, within the timeout', async () => {
  const timeoutMs = 3000;
  let killedAt = 0;
  const runs = await runRanks({
    worker,
    worldSize: SIZE,
    timeoutMs: 30_000,
    env: { MODE: "loop", BACKEND: "emu", TEST_TIMEOUT_MS: String(timeoutMs) },
    onLine: (rank, line, procs) => {
      if (rank === 1 && line === "looping" && killedAt === 0) {
        killedAt = performance.now();
        procs.find((p) => p.rank === 1)!.child.kill("SIGKILL");
      }
    },
  });
  assert.ok(killedAt > 0, "rank 1 never reached its loop");
  assert.equal(runs[0].code, 1, runs[0].stderr);
  assert.equal(runs[0].result?.code, "peer");
  assert.match(String(runs[0].result?.error), /^allReduce \(op #\d+\): rank 1 died/);
  assert.ok(runs[0].elapsedMs - runs[1].elapsedMs < timeoutMs + 2000, "noticed too late");
});
