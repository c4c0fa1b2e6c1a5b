// 3-D parallelism across 8 real rank processes (a 2 (pp) × 2 (dp_shard) × 2 (tp) mesh):
// tp_problem's tiny GPT split into 2 pipeline stages by parallelizePipelineGPT (TP, activation
// checkpointing, FSDP per block and on each stage root, then the schedule over the pp group),
// trained by 1F1B with full AC and by GPipe without, checked against one process on the whole
// batch: losses (last stage, averaged over dp), clipGradNormPipeline's total norms on every rank,
// first-step gradients and weights after 3 clipped AdamW steps (each rank's FSDP rows of its TP
// shard of its stage's parameters against the matching slice of the whole tensors).
import assert from "node:assert/strict";
import { assertAllOk, runRanks } from "../_harness/ranks.ts";
import { describe, markedProcesses, markerEnv } from "../_harness/processes.ts";
import { buildModel, CLIP, type Held, type Trace, trainParts } from "./workers/tp_problem.ts";
import { checkShards } from "./_tp_compare.ts";
import { type Case3D, ROWS } from "./workers/pipeline_3d_problem.ts";

const worker = new URL("./workers/pipeline_3d.ts", import.meta.url);
const TOLERANCE = 1e-5, TP = 2;

const CASES: Case3D[] = [
  { label: "PP 2 (1F1B) × FSDP 2 × TP 2, full AC", schedule: "1f1b", ac: true },
  { label: "PP 2 (GPipe) × FSDP 2 × TP 2", schedule: "gpipe", ac: false },
];

interface Result extends Trace {
  placements: Record<string, Held>;
  reduceScatters: number;
  ms: number;
}

interface Run {
  rank: number;
  pp: number;
  dp: number;
  tp: number;
  got: Result;
}

/** The reference's name for a stage's parameter: the last stage's head is the tied embedding. */
const wholeName = (name: string) => (name === "lm_head.weight" ? "transformer.wte.weight" : name);

/** Fails unless `run` matches `reference`; returns the worst relative error of its shards. */
function check(run: Run, runs: Run[], reference: Trace, label: string): number {
  const { rank, pp, dp, tp, got } = run,
    what = `${label}, rank ${rank} (pp ${pp}, dp ${dp}, tp ${tp})`;
  if (pp === 1) {
    const same = runs.filter((r) => r.pp === 1 && r.tp === tp);
    assert.equal(got.losses.length, reference.losses.length, `${what}: losses`);
    got.losses.forEach((_, k) => {
      const mean = same.reduce((s, r) => s + r.got.losses[k], 0) / same.length;
      const want = reference.losses[k];
      assert.ok(Math.abs(mean - want) <= TOLERANCE * want, `${what}: loss ${k} ${mean} vs ${want}`);
    });
  } else assert.deepEqual(got.losses, [], `${what}: losses off the last stage`);
  got.norms.forEach((n, k) => {
    const want = reference.norms[k];
    assert.ok(Math.abs(n - want) <= TOLERANCE * want, `${what}: norm ${k} ${n} vs ${want}`);
  });
  // Stage pp holds block pp and its root's parameters: two FSDP groups, one reduce-scatter each.
  assert.equal(got.reduceScatters, 2, `${what}: reduce-scatters in a step`);
  return checkShards(got, reference, tp, TP, TOLERANCE, what, wholeName);
}

Deno.test("PP 2 × FSDP 2 × TP 2 on 8 ranks (1F1B with full AC, GPipe) trains the tiny GPT like one process on the whole batch, clipGradNormPipeline's total norm included", async () => {
  const marker = crypto.randomUUID();
  const runs = await runRanks({
    worker,
    worldSize: 8,
    timeoutMs: 180_000,
    env: () => ({ CASES: JSON.stringify(CASES), ...markerEnv(marker) }),
  });
  const left = markedProcesses(marker);
  assert.deepEqual(left, [], `left behind: ${describe(left)}`);
  assertAllOk(runs);
  const reference = await trainParts(buildModel(), 0, 1, (loss) => loss.backward(), ROWS);
  reference.norms.forEach((n) => assert.ok(n > CLIP, `norm ${n} does not exceed the clip`));
  for (const [i, c] of CASES.entries()) {
    const results: Run[] = runs.map((run) => {
      const r = run.result! as { pp: number; dp: number; tp: number; results: Result[] };
      return { rank: run.rank, pp: r.pp, dp: r.dp, tp: r.tp, got: r.results[i] };
    });
    const worst = Math.max(...results.map((r) => check(r, results, reference, c.label)));
    // Every parameter of the whole model is held by some stage, the tied one by both ends.
    const names = new Set(results.flatMap((r) => Object.keys(r.got.placements).map(wholeName)));
    assert.deepEqual([...names].sort(), Object.keys(reference.grads).sort(), c.label);
    const ms = Math.max(...results.map((r) => r.got.ms));
    console.log(`${c.label}: worst relative error ${worst.toExponential(1)}, ${ms | 0} ms`);
  }
});
