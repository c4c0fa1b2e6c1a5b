/**
 * How the tensor-parallel equivalence tests (TP × FSDP, HSDP × TP) compare each rank's run with
 * one process on the whole batch: losses averaged over the data-parallel ranks, clipped norms,
 * and each rank's first-step gradient and final weight shards against the matching slices of the
 * whole tensors, with the two kinds of element whose true gradient is zero treated explicitly
 * (keyBiasApart, apartVanishing).
 * @module
 */

import assert from "node:assert/strict";
import { relativeError } from "../_harness/close.ts";
import { type Held, shardOf, type Trace } from "./workers/tp_problem.ts";

/** One rank's run: its data-parallel index, its TP rank, and what it trained. */
export interface RankRun {
  rank: number;
  dp: number;
  tp: number;
  got: Trace & { placements: Record<string, Held> };
}

/**
 * The q and v thirds of a fused q|k|v bias (whole, or one rank's rows of its TP shard: the thirds
 * of the TP shard are `rows / 3`-long only when FSDP keeps all of it, so the k part is found by
 * position in the TP shard). The key bias's gradient is zero (softmax ignores a shift of a query's
 * scores), so its value after AdamW, which scales any gradient to steps of the learning rate's
 * size, is float noise amplified, whatever the parallelism; it is checked to be noise and not
 * compared.
 */
export function keyBiasApart(
  bias: number[],
  start: number,
  localLength: number,
  what: string,
): number[] {
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
export function apartVanishing(
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

/**
 * Checks every rank's run against `reference` (one process on the whole batch) within
 * `tolerance`: the mean loss over the ranks of each TP rank (each data-parallel rank's loss is
 * its equal part's mean), the clipped norms, and each parameter's first-step gradient and final
 * weight shard (what `placements` says the rank holds, of TP size `tpSize`). Returns the worst
 * relative error of the shards.
 */
export function checkAgainstReference(
  runs: readonly RankRun[],
  reference: Trace,
  tpSize: number,
  tolerance: number,
  label: string,
): number {
  let worst = 0;
  for (const { rank, dp, tp, got } of runs) {
    const what = `${label}, rank ${rank} (dp ${dp}, tp ${tp})`;
    const same = runs.filter((r) => r.tp === tp);
    got.losses.forEach((_, k) => {
      const mean = same.reduce((s, r) => s + r.got.losses[k], 0) / same.length;
      const want = reference.losses[k];
      assert.ok(Math.abs(mean - want) <= tolerance * want, `${what}: loss ${k} ${mean} vs ${want}`);
    });
    got.norms.forEach((n, k) => {
      const want = reference.norms[k];
      assert.ok(Math.abs(n - want) <= tolerance * want, `${what}: norm ${k} ${n} vs ${want}`);
    });
    assert.deepEqual(Object.keys(got.grads), Object.keys(reference.grads), `${what}: names`);
    worst = Math.max(worst, checkShards(got, reference, tp, tpSize, tolerance, what));
  }
  return worst;
}

/**
 * Checks one rank's first-step gradient and final weight of each parameter it holds (what
 * `placements` says: its TP rank `tp` of `tpSize`'s shard, its FSDP rows) against the matching
 * slice of `reference`'s whole tensors within `tolerance`, the key bias and vanishing-gradient
 * elements apart; `wholeName` maps a held name to the reference's (a pipeline's last stage holds
 * the tied embedding as `lm_head.weight`). Returns the worst relative error.
 */
export function checkShards(
  got: Pick<Trace, "grads" | "final"> & { placements: Record<string, Held> },
  reference: Trace,
  tp: number,
  tpSize: number,
  tolerance: number,
  what: string,
  wholeName: (name: string) => string = (name) => name,
): number {
  let worst = 0;
  for (const [name, held] of Object.entries(got.placements)) {
    const whole = wholeName(name);
    assert.ok(whole in reference.grads, `${what}: ${name} is not a parameter of the whole model`);
    for (
      const [kind, all, ref] of [
        ["gradient", got.grads, reference.grads],
        ["weight", got.final, reference.final],
      ] as const
    ) {
      let mine = all[name], want = shardOf(ref[whole], held, tp, tpSize);
      if (kind === "weight" && name.endsWith("attn.c_attn.bias")) {
        const local = held.fullShape[0] / (held.dim === 0 ? tpSize : 1), start = held.rowStart;
        mine = keyBiasApart(mine, start, local, what);
        want = keyBiasApart(want, start, local, "reference");
      } else if (kind === "weight") {
        const grad0 = shardOf(reference.grads[whole], held, tp, tpSize);
        [mine, want] = apartVanishing(mine, want, grad0, `${what}: ${name}`);
      }
      const err = relativeError(mine, want, `${what}: ${kind} of ${name}`);
      assert.ok(err <= tolerance, `${what}: ${kind} of ${name} has relative error ${err}`);
      worst = Math.max(worst, err);
    }
  }
  return worst;
}
