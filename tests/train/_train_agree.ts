/**
 * The train job run on cuda and on the cpu from the same seed and data, and what it logged and
 * ended with compared: every record of metrics.jsonl (loss, gradient norm), the `done:` line's
 * validation loss and each rank's final weights, within 1e-5 (train_agree_cuda_test.ts,
 * pp_train_cuda_test.ts).
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { cuda } from "../../mod.ts";
import type { MetricRecord } from "../../src/train/metrics.ts";
import { relativeError } from "../_harness/close.ts";
import { withTempDir } from "../_harness/processes.ts";
import { freePort } from "../_harness/ranks.ts";
import { assertSucceeded, readSaved, train } from "./_train.ts";

/** A subprocess's limit: an NCCL hang in it costs this much, then it is killed. */
export const SUBPROCESS_MS = 45_000;
/** The agreement asked of every loss, gradient norm and weight tensor. */
const TOLERANCE = 1e-5;

/**
 * The smallest GPT the job takes, at a constant lr for 3 steps: AdamW moves every weight by about
 * the lr, so a wrong gradient shows. Without biases: the key bias's gradient is exactly zero, and
 * AdamW steps it by the ratio of two rounding errors, which no two kernels share.
 */
export const TINY_GPT = [
  ...["--model", "gpt", "--n-layer", "1", "--n-head", "2", "--n-embd", "16", "--block-size"],
  ...["16", "--batch-size", "8", "--bias", "false", "--lr-schedule", "constant", "--lr", "0.002"],
  ...["--threads", "1", "--max-steps", "3"],
];

/** What a run logged and ended with. */
export interface Outcome {
  records: MetricRecord[];
  /** Each rank's final weights, by name. */
  weights: Record<string, Float32Array | Int32Array>[];
  /** The `done:` line's validation loss (the GPT's), or null. */
  validation: number | null;
}

/** Runs the job on `device` with `ranks` processes in `dir/device`; what it logged and ended with. */
async function runOn(dir: string, device: string, ranks: number, job: string[]): Promise<Outcome> {
  const out = join(dir, device);
  await Deno.mkdir(out, { recursive: true });
  const run = await train([
    ...job,
    ...["--device", device, "--nproc-per-node", String(ranks), "--log-every", "1"],
    ...["--master-port", String(freePort()), "--snapshot", join(out, "snap")],
  ], { timeoutMs: SUBPROCESS_MS, env: { DTRAIN_WEIGHTS_DUMP: out } });
  assertSucceeded(run);
  const done = /^(?:\[rank 0\] )?done: .*$/m.exec(run.stdout)?.[0];
  assert.ok(done, `no done: line\n${run.stdout}`);
  const lines = (await Deno.readTextFile(join(out, "metrics.jsonl"))).trim().split("\n");
  return {
    records: lines.map((l) => JSON.parse(l) as MetricRecord),
    weights: Array.from(
      { length: ranks },
      (_, r) => readSaved(join(out, `rank${r}.safetensors`)).tensors,
    ),
    validation: Number(/validation loss (\S+)$/.exec(done)?.[1] ?? NaN) || null,
  };
}

/** Fails unless `got` is within TOLERANCE of `want`, relative to it. */
function assertNear(got: number | null | undefined, want: number | null | undefined, what: string) {
  assert.ok(typeof got === "number" && typeof want === "number", `${what}: ${got} vs ${want}`);
  const error = Math.abs(got - want) / Math.max(Math.abs(want), 1e-30);
  assert.ok(error <= TOLERANCE, `${what}: ${got} on cuda vs ${want} on the cpu`);
}

/** Fails unless the cuda run logged and ended as the cpu run did; returns the worst weight error. */
function assertAgree(onCuda: Outcome, onCpu: Outcome): number {
  assert.ok(onCpu.records.length > 0, "the runs logged steps");
  assert.deepEqual(
    onCuda.records.map((r) => `${r.kind} ${r.step}`),
    onCpu.records.map((r) => `${r.kind} ${r.step}`),
    "the same records",
  );
  onCpu.records.forEach((want, i) => {
    const got = onCuda.records[i], what = `${want.kind} record of step ${want.step}`;
    assertNear(got.loss, want.loss, `${what}: loss`);
    if (want.kind === "step") assertNear(got.gradNorm, want.gradNorm, `${what}: gradient norm`);
  });
  // Printed to 4 decimals: equal as printed.
  assert.equal(onCuda.validation, onCpu.validation, "the done: line's validation loss");
  let worst = 0;
  onCpu.weights.forEach((want, rank) => {
    const got = onCuda.weights[rank];
    assert.deepEqual(Object.keys(got).sort(), Object.keys(want).sort(), `rank ${rank}: names`);
    for (const [name, values] of Object.entries(want)) {
      const error = relativeError(got[name], values, `rank ${rank}: ${name}: length`);
      assert.ok(error <= TOLERANCE, `rank ${rank}: ${name}: cuda vs cpu relative error ${error}`);
      worst = Math.max(worst, error);
    }
  });
  return worst;
}

/**
 * Runs `job(dir)` on the cpu, then on cuda, on 2 ranks (as many as there are GPUs, if fewer), and
 * fails unless they agree; `check` looks at the cpu run first (that it logged what is compared).
 */
export async function assertCudaRunsAsCpu(
  prefix: string,
  job: (dir: string) => Promise<string[]>,
  check: (onCpu: Outcome) => void,
): Promise<void> {
  const ranks = Math.min(2, cuda.deviceCount());
  await withTempDir(prefix, async (dir) => {
    const args = await job(dir);
    const onCpu = await runOn(dir, "cpu", ranks, args);
    check(onCpu);
    const worst = assertAgree(await runOn(dir, "cuda", ranks, args), onCpu);
    console.log(`${ranks} rank(s): worst weight relative error ${worst.toExponential(1)}`);
  });
}
