// 3-D parallelism across 8 real rank processes (a 2 (dp_replicate) × 2 (dp_shard) × 2 (tp)
// mesh): the tiny GPT made tensor-parallel on tp, then fully sharded per block and on the root
// over the (dp_replicate, dp_shard) mesh (HSDP × TP), without and with full activation
// checkpointing and sequence parallelism, checked against one process on the whole batch:
// losses, first-step gradients (each rank's FSDP rows of its TP shard against the matching slice
// of the whole gradient, bit-equal on both replicas), clipGradNorm's total norms and weights after
// 3 clipped AdamW steps.
import assert from "node:assert/strict";
import { assertAllOk, runRanks } from "../_harness/ranks.ts";
import { describe, markedProcesses, markerEnv } from "../_harness/processes.ts";
import { buildModel, type Case, CLIP, trainParts } from "./workers/tp_problem.ts";
import { checkAgainstReference, type RankRun } from "./_tp_compare.ts";

const worker = new URL("./workers/hsdp_tp.ts", import.meta.url);
const TOLERANCE = 1e-5;
/**
 * Sequences per batch: two per data-parallel rank. With one (4 in all), this problem is at float
 * noise's edge: one process alone, the whole batch in one backward pass against its four quarters
 * in four, ends 1.5e-5 apart in h.1's MLP projection after 3 AdamW steps; with 8, 1.5e-6.
 */
const ROWS = 8;

const CASES: Case[] = [
  { label: "HSDP 2 × 2 × TP 2", sequenceParallel: false, ac: false },
  { label: "HSDP 2 × 2 × TP 2 (sequence parallel), full AC", sequenceParallel: true, ac: true },
];

interface Rank {
  dp: number;
  tp: number;
  replicate: number;
  shard: number;
  results: (RankRun["got"] & { wrapped: string[]; ms: number })[];
}

Deno.test("HSDP 2 × 2 × TP 2 on 8 ranks (without AC, and sequence parallel with full AC) trains the tiny GPT like one process on the whole batch, clipGradNorm's total norm included", async () => {
  const marker = crypto.randomUUID();
  const started = performance.now();
  const runs = await runRanks({
    worker,
    worldSize: 8,
    timeoutMs: 180_000,
    env: () => ({ CASES: JSON.stringify(CASES), ROWS: String(ROWS), ...markerEnv(marker) }),
  });
  const wall = performance.now() - started;
  const left = markedProcesses(marker);
  assert.deepEqual(left, [], `left behind: ${describe(left)}`);
  assertAllOk(runs);
  const reference = await trainParts(buildModel(), 0, 1, (loss) => loss.backward(), ROWS);
  reference.norms.forEach((n) => assert.ok(n > CLIP, `norm ${n} does not exceed the clip`));
  const ranks = runs.map((run) => run.result! as unknown as Rank);
  ranks.forEach((r, rank) => {
    // Row-major mesh: rank = (replicate × 2 + shard) × 2 + tp.
    assert.deepEqual([r.replicate, r.shard, r.tp], [rank >> 2, (rank >> 1) & 1, rank & 1]);
  });
  for (const [i, c] of CASES.entries()) {
    const results = ranks.map((r, rank) => ({ rank, dp: r.dp, tp: r.tp, got: r.results[i] }));
    const worst = checkAgainstReference(results, reference, 2, TOLERANCE, c.label);
    for (const [rank, r] of ranks.entries()) {
      const got = r.results[i], what = `${c.label}, rank ${rank}`;
      assert.deepEqual(got.wrapped, c.ac ? ["transformer.h.0", "transformer.h.1"] : [], what);
      // HSDP sharded the TP shard's rows across dp_shard only: both replicas hold the same rows,
      // and got bit-equal gradients for them.
      const qkv = got.placements["transformer.h.0.attn.c_attn.weight"];
      assert.deepEqual(qkv, {
        dim: 0,
        chunks: 3,
        fullShape: [96, 32],
        rowStart: 24 * r.shard,
        rows: 24,
      });
      const replica = ranks.findIndex((o) => o.tp === r.tp && o.shard === r.shard && o !== r);
      assert.deepEqual(got.grads, ranks[replica].results[i].grads, `${what}: replica ${replica}`);
    }
    const ms = Math.max(...ranks.map((r) => r.results[i].ms));
    console.log(`${c.label}: worst relative error ${worst.toExponential(1)}, ${ms | 0} ms`);
  }
  console.log(`8 ranks: ${wall | 0} ms from spawn to the last exit`);
});
