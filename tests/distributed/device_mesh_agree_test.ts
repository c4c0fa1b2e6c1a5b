// initDeviceMesh across 4 real rank processes that do not all pass the same mesh: every rank
// names which ranks passed which shape or names within a second, calls no live rank dead, and
// can make a mesh afterwards (before: store timeouts, one rank saying the live others died), on a
// host world and on one that reaches only its devices (emu, as an NCCL world).
// And a mesh of 22 dimensions, 20 of size 1: made in under 3 seconds (about 0.1 s) with the right
// groups (before: 2^22 sets of dimensions enumerated, 64 s and 1.5 GB per rank here).
import assert from "node:assert/strict";
import { assertAllOk, type RankResult, runRanks } from "../_harness/ranks.ts";
import { describe, markedProcesses, markerEnv } from "../_harness/processes.ts";

const worker = new URL("./workers/device_mesh_agree.ts", import.meta.url);

async function runCase(kase: string, odd = -1): Promise<RankResult[]> {
  const marker = crypto.randomUUID();
  const runs = await runRanks({
    worker,
    worldSize: 4,
    timeoutMs: 60_000,
    env: () => ({ CASE: kase, ODD_RANK: String(odd), ...markerEnv(marker) }),
  });
  const left = markedProcesses(marker);
  assert.deepEqual(left, [], `left behind: ${describe(left)}`);
  assertAllOk(runs);
  return runs;
}

/** Every rank failed with `pattern`, a "mismatch" naming no rank dead, within a second. */
function assertNamedEverywhere(runs: RankResult[], pattern: RegExp): void {
  for (const run of runs) {
    const result = run.result!, what = `rank ${run.rank}`;
    assert.match(String(result.failed), pattern, what);
    assert.doesNotMatch(String(result.failed), /died|timed out/, what);
    assert.equal(result.code, "mismatch", what);
    assert.ok((result.ms as number) < 1000, `${what} took ${result.ms} ms to fail`);
    // A mesh every rank agrees on works afterwards: its "tp" group sums exactly its two ranks.
    const tp = run.rank - run.rank % 2;
    assert.deepEqual(result.afterwards, { ranks: [tp, tp + 1], sum: 2 ** tp + 2 ** (tp + 1) });
  }
}

Deno.test("initDeviceMesh: a rank passing another meshShape is named on every rank within a second, no rank called dead", async () => {
  assertNamedEverywhere(
    await runCase("shape", 2),
    /^initDeviceMesh: the ranks disagree: meshShape: rank 2 has \[4, 1\], ranks 0, 1 and 3 have \[2, 2\]; every rank must call initDeviceMesh with the same device type, meshShape and meshDimNames$/,
  );
});

Deno.test("initDeviceMesh: on a world that does not reach host memory (emu, as NCCL), a rank passing another meshShape is named on every rank within a second", async () => {
  assertNamedEverywhere(
    await runCase("emu", 1),
    /^initDeviceMesh: the ranks disagree: meshShape: rank 1 has \[4, 1\], ranks 0, 2 and 3 have \[2, 2\];/,
  );
});

Deno.test("initDeviceMesh: a rank naming the dimensions otherwise is named on every rank within a second", async () => {
  assertNamedEverywhere(
    await runCase("names", 3),
    /^initDeviceMesh: the ranks disagree: meshDimNames: rank 3 has \["tp", "dp"\], ranks 0, 1 and 2 have \["dp", "tp"\];/,
  );
});

Deno.test("initDeviceMesh: 22 dimensions, 20 of size 1, are made in under 3 seconds with the right groups", async () => {
  const runs = await runCase("wide");
  for (const run of runs) {
    const r = run.rank, what = `rank ${r}`;
    const result = run.result as {
      ms: number;
      dims: { ranks: number[]; sum: number }[];
      flattened: Record<string, { ranks: number[]; sum: number }>;
      coordinate: number[];
    };
    const group = (ranks: number[]) => ({ ranks, sum: ranks.reduce((s, q) => s + 2 ** q, 0) });
    // Row-major: d21 (size 2) is the fastest, d10 the next.
    const along10 = group([r % 2, r % 2 + 2]), alone = group([r]);
    const want = Array.from(
      { length: 22 },
      (_, d) => d === 10 ? along10 : d === 21 ? group([r - r % 2, r - r % 2 + 1]) : alone,
    );
    assert.deepEqual(result.dims, want, `${what}: each dimension's group`);
    assert.deepEqual(result.flattened.mixed, along10, `${what}: d0, d10, d15 flattened`);
    assert.deepEqual(result.flattened.ones, alone, `${what}: d1, d2 flattened`);
    assert.deepEqual(result.flattened.both, group([0, 1, 2, 3]), `${what}: d3, d10, d21`);
    assert.equal(result.coordinate[10], r >> 1, `${what}: coordinate along d10`);
    assert.ok(result.ms < 3000, `${what}: initDeviceMesh took ${result.ms | 0} ms`);
    console.log(`${what}: initDeviceMesh of 22 dimensions in ${result.ms.toFixed(0)} ms`);
  }
});
