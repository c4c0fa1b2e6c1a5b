/**
 * Comparing the weights a parallel train job ends with against one process's on the same global
 * batches, at the relative error (1e-5), apart from the elements whose gradient is float
 * noise, which are checked by a criterion of their own (see {@linkcode assertTrainedClose}).
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import type { MetricRecord } from "../../src/train/metrics.ts";
import { relativeError } from "../_harness/close.ts";

/** A run's saved tensors by name. */
export type Weights = Record<string, Float32Array | Int32Array>;

/** Gradients by name. */
export type Gradients = Record<string, Float64Array>;

/** The relative error (L2, per tensor) every element with a meaningful gradient is held to. */
export const TOLERANCE = 1e-5;
/** How far (absolute) a noise-driven element may end from the reference (see below). */
const NOISE = 1e-4;
/** A gradient below this fraction of its tensor's RMS gradient is float noise around zero. */
const VANISHING = 1e-4;

/**
 * The gradient of one process's first step, from two real one-step SGD runs of the job (no
 * momentum, weight decay or clipping) at learning rates `lr` and `2 lr`: `w_lr − w_2lr = lr·g`.
 */
export function gradientOf(atLr: Weights, at2Lr: Weights, lr: number): Gradients {
  return Object.fromEntries(
    Object.entries(atLr).map((
      [k, w],
    ) => [k, Float64Array.from(w, (v, i) => (v - at2Lr[k][i]) / lr)]),
  );
}

/**
 * Fails unless `got` (a parallel run's weights after its AdamW steps) equals `want` (one
 * process's) within {@linkcode TOLERANCE}, relative per tensor, on every element whose gradient
 * is meaningful. AdamW steps each element by about `lr · m / √v`, the ratio of its own gradient's
 * average to its size, whatever that size: for an element whose true gradient is 0, what it steps
 * by is the sign and ratio of float rounding, which any other summation order (over ranks, or over
 * TP shards) changes. Two kinds of element are so, and are checked apart:
 * - the key third of each fused q|k|v bias (`attn.c_attn.bias`): its gradient is exactly 0 (the
 *   softmax ignores a shift of all of a query's scores, which is what the key bias adds), so from
 *   its initial 0 it holds rounding amplified; both runs' values are checked to be below 1e-4 in
 *   size (a misplaced shard there holds a query or value bias, ~1e-2), as tests/parallel/tp_test.ts;
 * - elements whose first-step gradient (`grad0`, one process's) is below 1e-4 of its tensor's
 *   RMS gradient (an MLP unit GELU almost switches off, say): at most 1% of a tensor (at least one
 *   allowed), each within 1e-4 of the reference, so that a wrong tensor cannot hide among them.
 *
 * @returns The worst relative error and its tensor, for the report.
 */
export function assertTrainedClose(
  got: Weights,
  want: Weights,
  grad0: Gradients,
  what: string,
): { error: number; name: string } {
  assert.deepEqual(Object.keys(got).sort(), Object.keys(want).sort(), `${what}: names`);
  let worst = { error: 0, name: "" };
  for (const [name, wanted] of Object.entries(want)) {
    const g = grad0[name], mine = got[name], n = wanted.length;
    assert.equal(mine.length, n, `${what}: ${name}: length`);
    let apart: (i: number) => boolean;
    if (name.endsWith("attn.c_attn.bias")) {
      apart = (i) => i >= n / 3 && i < (2 * n) / 3;
      for (let i = n / 3; i < (2 * n) / 3; i++) {
        const ok = Math.abs(mine[i]) < NOISE && Math.abs(wanted[i]) < NOISE;
        assert.ok(ok, `${what}: ${name}: key bias [${i}] ${mine[i]} vs ${wanted[i]} is not noise`);
      }
    } else {
      const rms = Math.sqrt(g.reduce((a, v) => a + v * v, 0) / n);
      apart = (i) => Math.abs(g[i]) < VANISHING * rms;
      let count = 0;
      for (let i = 0; i < n; i++) {
        if (!apart(i)) continue;
        count++;
        const off = Math.abs(mine[i] - wanted[i]);
        assert.ok(off <= NOISE, `${what}: ${name}[${i}] (vanishing gradient) is off by ${off}`);
      }
      assert.ok(count <= Math.max(1, n / 100), `${what}: ${name}: ${count} vanishing gradients`);
    }
    const kept = (t: ArrayLike<number>) => Array.from(t).filter((_, i) => !apart(i));
    const error = relativeError(kept(mine), kept(wanted));
    assert.ok(error <= TOLERANCE, `${what}: ${name} has relative error ${error}`);
    if (error > worst.error) worst = { error, name };
  }
  return worst;
}

/** The step records of a run's metrics.jsonl: loss and gradient norm (before clipping). */
export async function steps(
  dir: string,
): Promise<{ step: number; loss: number; gradNorm: number }[]> {
  return (await Deno.readTextFile(join(dir, "metrics.jsonl"))).trim().split("\n")
    .map((l) => JSON.parse(l) as MetricRecord).filter((r) => r.kind === "step")
    .map((r) => ({ step: r.step, loss: r.loss, gradNorm: r.gradNorm! }));
}

/** Fails unless the steps `dir` ran (a resumed run's last ones) logged `reference`'s numbers. */
export async function assertStepsClose(
  dir: string,
  reference: string,
  what: string,
): Promise<void> {
  const got = await steps(dir), all = await steps(reference);
  const want = all.slice(all.length - got.length);
  assert.deepEqual(got.map((s) => s.step), want.map((s) => s.step), `${what}: steps`);
  got.forEach((s, i) => {
    for (const key of ["loss", "gradNorm"] as const) {
      const [a, b] = [s[key], want[i][key]];
      assert.ok(Math.abs(a - b) <= TOLERANCE * b, `${what}: step ${s.step}: ${key} ${a} vs ${b}`);
    }
  });
}
