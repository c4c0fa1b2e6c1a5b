// The blocking collectives (ProcessGroup.allReduceBlocking, allGatherBlocking,
// reduceScatterBlocking) across real rank processes, on every host transport the suite's two
// passes reach (shared memory by default, Gloo under DTRAIN_SHM=0), shm+gloo on two fake hosts,
// shared memory with its issue queue off, and emu device tensors: each equals its async
// counterpart (f32 and bf16; sum, avg, max) and, where exact, the hand computation; a blocking
// call behind an async one in flight is refused (no issue queue) or runs after it (queued);
// uneven calls are refused; a rank killed before a blocking all-reduce is named by the others.
import assert from "node:assert/strict";
import { assertAllOk, type RankResult, runRanks } from "../_harness/ranks.ts";
import { describe, markedProcesses, markerEnv } from "../_harness/processes.ts";
import { BLOCKING_LENGTHS, BLOCKING_OPS, blockingInput } from "./workers/_blocking.ts";

const worker = new URL("./workers/blocking.ts", import.meta.url);
const glooPass = Deno.env.get("DTRAIN_SHM") === "0";

/** Runs the worker; fails if a process outlives the run. */
async function run(
  worldSize: number,
  env: (rank: number) => Record<string, string>,
  onLine?: Parameters<typeof runRanks>[0]["onLine"],
): Promise<RankResult[]> {
  const marker = crypto.randomUUID();
  const runs = await runRanks({
    worker,
    worldSize,
    timeoutMs: 60_000,
    env: (rank) => ({ ...env(rank), ...markerEnv(marker) }),
    onLine,
  });
  const left = markedProcesses(marker);
  assert.deepEqual(left, [], `left behind: ${describe(left)}`);
  return runs;
}

type Outcome = { message: string; code?: string } | "ok";

const CASES = [
  { name: "the host transport", size: 2, env: () => ({}), host: true },
  { name: "the host transport", size: 3, env: () => ({}), host: true },
  {
    name: "shared memory with its issue queue off",
    size: 2,
    // DTRAIN_SHM "" keeps shared memory on under the suite's DTRAIN_SHM=0 pass.
    env: () => ({ DTRAIN_SHM: "", DTRAIN_SHM_QUEUE: "0" }),
    backend: "shm",
  },
  {
    name: "shm+gloo (two fake hosts of two)",
    size: 4,
    env: (r: number) => ({ DTRAIN_SHM_HOST: `host-${r < 2 ? "a" : "b"}`, DTRAIN_SHM: "" }),
    backend: "shm+gloo",
  },
  { name: "emu device tensors", size: 2, env: () => ({ DEVICE: "emu" }), backend: "emu" },
];

for (const c of CASES) {
  const backend = c.backend ?? (glooPass ? "gloo" : "shm");
  // Shared memory and emu keep an issue queue (unless DTRAIN_SHM_QUEUE=0); Gloo and shm+gloo do not.
  const queued = (backend === "shm" || backend === "emu") && !c.name.includes("queue off");
  Deno.test(`blocking collectives on ${c.size} ranks over ${c.name} (${backend}) equal the async ones; a call behind one in flight is ${queued ? "ordered after it" : "refused"}; uneven calls are refused`, async () => {
    const runs = await run(c.size, (r) => ({ MODE: "compare", ...c.env(r) }));
    assertAllOk(runs);
    const size = c.size;
    const ranks = runs.map((r) => r.rank);
    const inputs = (n: number, salt: number) => ranks.map((r) => blockingInput(r, n, salt));
    const fold = (xs: number[][], f: (a: number, b: number) => number) =>
      xs[0].map((_, i) => xs.map((x) => x[i]).reduce(f));
    const exact = {
      sum: (xs: number[][]) => fold(xs, (a, b) => a + b),
      max: (xs: number[][]) => fold(xs, (a, b) => Math.max(a, b)),
    } as Record<string, ((xs: number[][]) => number[]) | undefined>;
    for (const { rank, result } of runs) {
      assert.equal(result!.backend, backend, `rank ${rank}`);
      const pairs = result!.pairs as Record<string, [number[], number[]]>;
      for (const [key, [async, blocking]] of Object.entries(pairs)) {
        assert.deepEqual(blocking, async, `rank ${rank} ${key}: blocking against async`);
      }
      for (const [salt, op] of BLOCKING_OPS.entries()) {
        const hand = exact[op];
        if (hand === undefined) continue;
        for (const n of BLOCKING_LENGTHS) {
          const [, reduced] = pairs[`allReduce/f32/${op}/${n}`];
          assert.deepEqual(reduced, hand(inputs(n, salt)), `rank ${rank} allReduce ${op} ×${n}`);
          const [, chunk] = pairs[`reduceScatter/f32/${op}/${n}`];
          const whole = hand(inputs(size * n, salt + 10));
          assert.deepEqual(
            chunk,
            whole.slice(rank * n, (rank + 1) * n),
            `rank ${rank} reduceScatter ${op} ×${n}`,
          );
        }
      }
      for (const n of BLOCKING_LENGTHS) {
        const [, gathered] = pairs[`allGather/f32/${n}`];
        assert.deepEqual(gathered, inputs(n, 20).flat(), `rank ${rank} allGather ×${n}`);
      }

      const behind = result!.behind as Record<string, Outcome | number[]>;
      const total = (size * (size + 1)) / 2;
      for (const what of ["allReduce", "reduceScatter", "allGather"]) {
        if (queued) {
          assert.equal(behind[what], "ok", `rank ${rank} ${what} behind one in flight`);
        } else {
          assert.deepEqual(behind[what], {
            message: `${what}Blocking: 1 collective(s) still in flight; await them first`,
            code: "invalid",
          }, `rank ${rank} ${what}`);
        }
      }
      // Queued: the sum ran first (else the max would have made every element `size`, then
      // the sum size²). Refused: the async sum alone ran (and the refused call changed nothing).
      assert.deepEqual(behind.allReduceValue, new Array(4).fill(total), `rank ${rank}`);
      assert.deepEqual(behind.reduceScatterValue, new Array(4).fill(queued ? size * total : 0));
      assert.deepEqual(
        behind.allGatherValue,
        new Array(4 * size).fill(queued ? total : 0),
        `rank ${rank} allGather after the sum`,
      );

      const uneven = result!.uneven as Record<string, Outcome>;
      assert.deepEqual(uneven.reduceScatter, {
        message:
          `reduceScatterBlocking: input has ${3 * size + 1} elements, expected ${3 * size} ` +
          `(output length 3 × group size ${size})`,
        code: "invalid",
      });
      assert.deepEqual(uneven.allGather, {
        message: `allGatherBlocking: output has ${2 * size - 1} elements, expected ${2 * size} ` +
          `(input length 2 × group size ${size})`,
        code: "invalid",
      });
      assert.deepEqual(uneven.dtypes, {
        message: "reduceScatterBlocking: input is f32 but the other tensor is bf16",
        code: "invalid",
      });
      assert.deepEqual(result!.after, new Array(3).fill((size * (size - 1)) / 2), `rank ${rank}`);
    }
  });
}

Deno.test("a rank killed (SIGKILL) before a blocking all-reduce is named by global rank in the others' error, within the timeout", async () => {
  const victim = 1, timeoutMs = 5000;
  let ready = 0, killedAt = 0;
  const runs = await run(
    3,
    () => ({ MODE: "kill", VICTIM: String(victim), TIMEOUT_MS: String(timeoutMs) }),
    (_rank, line, procs) => {
      if (line !== "ready") return;
      if (++ready === 3) {
        killedAt = performance.now();
        procs.find((p) => p.rank === victim)!.child.kill("SIGKILL");
      }
    },
  );
  assert.ok(killedAt > 0, "the ranks never got ready");
  for (const r of runs.filter((r) => r.rank !== victim)) {
    assert.equal(r.code, 0, `rank ${r.rank}: ${r.stderr}`);
    const failure = r.result!.failure as Outcome;
    assert.notEqual(failure, "ok", `rank ${r.rank} went on without rank ${victim}`);
    const { message, code } = failure as { message: string; code: string };
    assert.match(message, /^allReduce\b/, `rank ${r.rank}: ${message}`);
    assert.match(message, new RegExp(`rank ${victim}\\b`), `rank ${r.rank}: ${message}`);
    assert.ok(code === "peer" || code === "timeout", `rank ${r.rank}: ${code}`);
    assert.ok(Number(r.result!.afterMs) < timeoutMs + 2000, `rank ${r.rank}: ${r.result!.afterMs}`);
  }
});
