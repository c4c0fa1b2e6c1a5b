// 2-D parallelism across 4 real rank processes (a 2 (dp) × 2 (tp) mesh): the tiny GPT made
// tensor-parallel on tp, then fully sharded per block and on the root across dp (torchtitan's
// order), without and with full activation checkpointing and with sequence parallelism, checked
// against one process on the whole batch: losses, first-step gradients (each rank's FSDP rows of
// its TP shard against the matching slice of the whole gradient), clipGradNorm's total norms and
// weights after 3 clipped AdamW steps.
import assert from "node:assert/strict";
import { assertAllOk, runRanks } from "../_harness/ranks.ts";
import { describe, markedProcesses, markerEnv } from "../_harness/processes.ts";
import type { Case } from "./workers/tp_fsdp.ts";
import {
  buildModel,
  CLIP,
  type Held,
  shardOf,
  type Trace,
  trainParts,
} from "./workers/tp_problem.ts";
import { relativeError } from "../_harness/close.ts";

const worker = new URL("./workers/tp_fsdp.ts", import.meta.url);
const TOLERANCE = 1e-5;

const CASES: Case[] = [
  { label: "TP 2 × FSDP 2", sequenceParallel: false, ac: false },
  { label: "TP 2 (sequence parallel) × FSDP 2, full AC", sequenceParallel: true, ac: true },
  { label: "TP 2 × FSDP 2, full AC", sequenceParallel: false, ac: true },
];

/**
 * The q and v thirds of a fused q|k|v bias (whole, or one rank's rows of its TP shard: the thirds
 * of the TP shard are `rows / 3`-long only when FSDP keeps all of it, so the k part is found by
 * position in the TP shard). The key bias's gradient is zero (softmax ignores a shift of a query's
 * scores), so its value after AdamW, which scales any gradient to steps of the learning rate's
 * size, is float noise amplified, whatever the parallelism (as in tp_test.ts); it is checked to be
 * noise and not compared.
 */
function keyBiasApart(bias: number[], start: number, localLength: number, what: string): number[] {
  const third = localLength / 3;
  const isKey = (i: number) => start + i >= third && start + i < 2 * third;
  const k = bias.filter((_, i) => isKey(i));
  assert.ok(k.every((v) => Math.abs(v) < 1e-4), `${what}: key bias ${k} is not noise`);
  return bias.filter((_, i) => !isKey(i));
}

/**
 * The weights of the elements whose first-step gradient is not vanishing, after checking the
 * others. An element whose gradient is float noise around zero (below 1e-4 of the tensor's RMS
 * gradient: one element of h.1's value weights has 3.8e-8 against neighbours' 1e-3, and its two
 * runs' values differ by 0.5%) gets AdamW steps of m/√v, the ratio of that noise, so its weight
 * differs by ~1e-5 between any two summation orders (data-parallel halves alone do it in one
 * process): each is checked within 1e-4 of the reference, and they are at most 1% of the tensor,
 * so that a wrong tensor cannot hide here.
 */
function apartVanishing(
  got: number[],
  want: number[],
  grad0: number[],
  what: string,
): [number[], number[]] {
  const rms = Math.sqrt(grad0.reduce((a, g) => a + g * g, 0) / grad0.length);
  const vanishing = grad0.map((g) => Math.abs(g) < 1e-4 * rms);
  const count = vanishing.filter((v) => v).length;
  assert.ok(count <= grad0.length / 100, `${what}: ${count} vanishing gradients`);
  vanishing.forEach((v, i) => {
    if (v) assert.ok(Math.abs(got[i] - want[i]) <= 1e-4, `${what}: element ${i} ${got[i]}`);
  });
  return [got.filter((_, i) => !vanishing[i]), want.filter((_, i) => !vanishing[i])];
}

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
    let worst = 0;
    const results = runs.map((run) => {
      const { dp, tp, results } = run.result! as { dp: number; tp: number; results: Result[] };
      return { rank: run.rank, dp, tp, got: results[i] };
    });
    for (const { rank, dp, tp, got } of results) {
      const what = `${c.label}, rank ${rank} (dp ${dp}, tp ${tp})`;
      assert.deepEqual(got.wrapped, c.ac ? ["transformer.h.0", "transformer.h.1"] : []);
      // Each dp rank's loss is its half's mean; both halves score the same number of targets.
      const other = results.find((r) => r.tp === tp && r.dp !== dp)!.got;
      got.losses.forEach((loss, k) => {
        const mean = (loss + other.losses[k]) / 2, want = reference.losses[k];
        assert.ok(
          Math.abs(mean - want) <= TOLERANCE * want,
          `${what}: loss ${k} ${mean} vs ${want}`,
        );
      });
      got.norms.forEach((n, k) => {
        const want = reference.norms[k];
        assert.ok(Math.abs(n - want) <= TOLERANCE * want, `${what}: norm ${k} ${n} vs ${want}`);
      });
      assert.deepEqual(Object.keys(got.grads), Object.keys(reference.grads), `${what}: names`);
      for (const [name, held] of Object.entries(got.placements)) {
        for (
          const [kind, all, whole] of [
            ["gradient", got.grads, reference.grads],
            ["weight", got.final, reference.final],
          ] as const
        ) {
          let mine = all[name], want = shardOf(whole[name], held, tp, 2);
          if (kind === "weight" && name.endsWith("attn.c_attn.bias")) {
            const local = held.fullShape[0] / 2, start = held.rowStart;
            mine = keyBiasApart(mine, start, local, what);
            want = keyBiasApart(want, start, local, "reference");
          } else if (kind === "weight") {
            const grad0 = shardOf(reference.grads[name], held, tp, 2);
            [mine, want] = apartVanishing(mine, want, grad0, `${what}: ${name}`);
          }
          const err = relativeError(mine, want);
          assert.ok(err <= TOLERANCE, `${what}: ${kind} of ${name} has relative error ${err}`);
          worst = Math.max(worst, err);
        }
      }
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
