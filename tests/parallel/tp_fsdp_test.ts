// 2-D parallelism across 4 real rank processes (a 2 (dp) × 2 (tp) mesh): the tiny GPT made
// tensor-parallel on tp, then fully sharded per block and on the root across dp (torchtitan's
// order), without and with full activation checkpointing and with sequence parallelism, checked
// against one process on the whole batch: losses, first-step gradients (each rank's FSDP rows of
// its TP shard against the matching slice of the whole gradient), clipGradNorm's total norms and
// weights after 3 clipped AdamW steps.
import assert from "node:assert/strict";
import { assertAllOk, runRanks } from "../_harness/ranks.ts";
import { describe, markedProcesses, markerEnv } from "../_harness/processes.ts";
import {
  buildModel,
  type Case,
  CLIP,
  type Held,
  type Trace,
  trainParts,
} from "./workers/tp_problem.ts";
import { checkAgainstReference } from "./_tp_compare.ts";

const worker = new URL("./workers/tp_fsdp.ts", import.meta.url);
const TOLERANCE = 1e-5;

const CASES: Case[] = [
  { label: "TP 2 × FSDP 2", sequenceParallel: false, ac: false },
  { label: "TP 2 (sequence parallel) × FSDP 2, full AC", sequenceParallel: true, ac: true },
  { label: "TP 2 × FSDP 2, full AC", sequenceParallel: false, ac: true },
];

interface Result extends Trace {
  wrapped: string[];
  placements: Record<string, Held>;
  ms: number;
}

Deno.test("TP 2 × FSDP 2 on 4 ranks (without AC, with full AC, with sequence parallelism) trains the tiny GPT like one process on the whole batch, clipGradNorm's total norm included", async () => {
  const marker = crypto.randomUUID();
  const runs = await runRanks({
    worker,
    worldSize: 4,
    timeoutMs: 120_000,
    env: () => ({ CASES: JSON.stringify(CASES), ...markerEnv(marker) }),
  });
  const left = markedProcesses(marker);
  assert.deepEqual(left, [], `left behind: ${describe(left)}`);
  assertAllOk(runs);
  const reference = await trainParts(buildModel(), 0, 1, (loss) => loss.backward());
  reference.norms.forEach((n) => assert.ok(n > CLIP, `norm ${n} does not exceed the clip`));
  for (const [i, c] of CASES.entries()) {
    const results = runs.map((run) => {
      const { dp, tp, results } = run.result! as { dp: number; tp: number; results: Result[] };
      return { rank: run.rank, dp, tp, got: results[i] };
    });
    const worst = checkAgainstReference(results, reference, 2, TOLERANCE, c.label);
    for (const { rank, dp, tp, got } of results) {
      const what = `${c.label}, rank ${rank} (dp ${dp}, tp ${tp})`;
      assert.deepEqual(got.wrapped, c.ac ? ["transformer.h.0", "transformer.h.1"] : []);
      // FSDP kept the TP placement, and sharded the TP shard's rows across dp.
      const qkv = got.placements["transformer.h.0.attn.c_attn.weight"];
      assert.deepEqual(qkv, {
        dim: 0,
        chunks: 3,
        fullShape: [96, 32],
        rowStart: 24 * dp,
        rows: 24,
      });
      const proj = got.placements["transformer.h.1.mlp.c_proj.weight"];
      assert.deepEqual(proj, {
        dim: 1,
        chunks: 1,
        fullShape: [32, 128],
        rowStart: 16 * dp,
        rows: 16,
      });
      assert.equal(got.placements["transformer.wpe.weight"].dim, null, `${what}: wpe replicated`);
    }
    const ms = Math.max(...results.map((r) => r.got.ms));
    console.log(`${c.label}: worst relative error ${worst.toExponential(1)}, ${ms | 0} ms`);
  }
});
