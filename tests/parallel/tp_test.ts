// Tensor parallelism across 2 real rank processes, checked against one process on the same
// batch: each differentiable collective's forward and backward, the tiny GPT's loss, first-step
// gradients (each rank's shard against the matching slice of the whole gradient), clipped norms
// and weights after 3 AdamW steps, with gathered logits, sequence parallelism and a
// vocabulary-parallel loss, without and with (full, selective) activation checkpointing, whose
// runs equal the plain ones bitwise; the bad plans' errors; and a rank killed inside a TP forward.
import assert from "node:assert/strict";
import { assertAllOk, type RankResult, runRanks } from "../_harness/ranks.ts";
import { describe, markedProcesses, markerEnv } from "../_harness/processes.ts";
import type { Mode } from "./workers/tp.ts";
import { buildModel, CLIP, type Held, type Trace, train } from "./workers/tp_problem.ts";
import { checkAgainstReference } from "./_tp_compare.ts";

const worker = new URL("./workers/tp.ts", import.meta.url);
const SIZE = 2;

async function runCase(env: Record<string, string>): Promise<RankResult[]> {
  const marker = crypto.randomUUID();
  const runs = await runRanks({
    worker,
    worldSize: SIZE,
    timeoutMs: 90_000,
    env: () => ({ ...env, ...markerEnv(marker) }),
  });
  const left = markedProcesses(marker);
  assert.deepEqual(left, [], `left behind: ${describe(left)}`);
  return runs;
}

const MODES: Mode[] = [
  { label: "gathered logits", sequenceParallel: false, lossParallel: false },
  { label: "sequence parallel", sequenceParallel: true, lossParallel: false },
  { label: "loss parallel", sequenceParallel: false, lossParallel: true },
  { label: "sequence and loss parallel", sequenceParallel: true, lossParallel: true },
  { label: "gathered logits, full AC", sequenceParallel: false, lossParallel: false, ac: "full" },
  {
    label: "sequence and loss parallel, full AC",
    sequenceParallel: true,
    lossParallel: true,
    ac: "full",
  },
  {
    label: "sequence parallel, selective AC",
    sequenceParallel: true,
    lossParallel: false,
    ac: "selective",
  },
];

Deno.test("tensor parallelism on 2 ranks: the differentiable collectives, the bad plans' errors, and the tiny GPT trained like one process (gathered logits, sequence parallel, loss parallel; without and with full and selective activation checkpointing, whose gradients equal the plain ones bitwise)", async () => {
  const runs = await runCase({ CASE: "train", MODES: JSON.stringify(MODES) });
  assertAllOk(runs);
  checkCollectives(runs);
  checkErrors(runs);
  checkCheckpointedBitwise(runs);
  for (const run of runs) {
    // Embedding column-wise (gathered), Linear row-wise on a split input, PrepareModuleOutput.
    const errors = run.result!.otherStyles as Record<string, number>;
    assert.deepEqual(Object.keys(errors), [
      "output",
      "0.weight",
      "1.weight",
      "1.bias",
      "2.weight",
      "2.bias",
    ]);
    for (const [name, err] of Object.entries(errors)) {
      assert.ok(err <= 1e-6, `rank ${run.rank}: ${name} has relative error ${err}`);
    }
  }
  const reference = train(buildModel());
  reference.norms.forEach((n) => assert.ok(n > CLIP, `norm ${n} does not exceed the clip`));
  const wrapped = { full: ["transformer.h.0", "transformer.h.1"], selective: ["transformer.h.1"] };
  for (const [i, mode] of MODES.entries()) {
    // Every rank reads the whole batch: each is its own data-parallel group of one.
    const results = runs.map((run) => ({
      rank: run.rank,
      dp: 0,
      tp: run.rank,
      got: (run.result!.modes as Result[])[i],
    }));
    const worst = checkAgainstReference(results, reference, SIZE, 1e-5, mode.label);
    for (const { rank, got } of results) {
      const what = `${mode.label}, rank ${rank}`;
      const want = mode.ac ? wrapped[mode.ac] : [];
      assert.deepEqual(got.wrapped, want, `${what}: blocks checkpointed`);
      // The plan shards what it says: the fused q|k|v by heads, both vocabulary users on dim 0.
      const p = got.placements;
      assert.deepEqual(p["transformer.h.0.attn.c_attn.weight"], {
        dim: 0,
        chunks: 3,
        fullShape: [96, 32],
        rowStart: 0,
        rows: 48,
      });
      assert.equal(p["transformer.wte.weight"].dim, 0, `${what}: wte`);
      assert.equal(p["lm_head.weight"], undefined, `${what}: lm_head.weight is tied to wte's`);
      assert.equal(p["transformer.h.1.mlp.c_proj.weight"].dim, 1, `${what}: row-wise`);
      assert.equal(p["transformer.wpe.weight"].dim, null, `${what}: wpe replicated`);
    }
    console.log(`${mode.label}: worst relative error ${worst.toExponential(1)}`);
  }
});

interface Result extends Trace {
  wrapped: string[];
  placements: Record<string, Held>;
}

/**
 * Checkpointed gradients equal the plain ones, bitwise: the recompute runs the same kernels on the
 * same values in the same order, and under TP each block's input gets its gradient from inside the
 * block only (the residual stream enters and leaves it), so no sum is reordered. The forward is
 * the same computation, so the losses are bitwise equal too; and so are the weights, which follow.
 * Each checkpointed mode is compared with the plain mode of the same TP options, on each rank.
 */
function checkCheckpointedBitwise(runs: RankResult[]): void {
  for (const run of runs) {
    const got = run.result!.modes as Result[];
    for (const [i, mode] of MODES.entries()) {
      if (mode.ac === undefined) continue;
      const plain = MODES.findIndex((m) =>
        m.ac === undefined && m.sequenceParallel === mode.sequenceParallel &&
        m.lossParallel === mode.lossParallel
      );
      const what = `rank ${run.rank}: ${mode.label} against ${MODES[plain].label}`;
      assert.deepEqual(got[i].losses, got[plain].losses, `${what}: losses`);
      assert.deepEqual(got[i].grads, got[plain].grads, `${what}: first-step gradients`);
      assert.deepEqual(got[i].norms, got[plain].norms, `${what}: norms`);
      assert.deepEqual(got[i].final, got[plain].final, `${what}: weights`);
    }
  }
}

/** Each collective's value and gradient on rank r: x = [r·10 + i], loss = sum(y · [i + 1 + r·100]). */
function checkCollectives(runs: RankResult[]): void {
  const x = (r: number) => Array.from({ length: 8 }, (_, i) => r * 10 + i); // [2, 4]
  const w = (r: number, n: number) => Array.from({ length: n }, (_, i) => i + 1 + r * 100);
  const add = (a: number[], b: number[]) => a.map((v, i) => v + b[i]);
  const cols = (t: number[], width: number, from: number, n: number) =>
    [0, 1].flatMap((row) => t.slice(row * width + from, row * width + from + n));
  const catCols = (a: number[], b: number[], width: number) =>
    [0, 1].flatMap((row) => [
      ...a.slice(row * width, (row + 1) * width),
      ...b.slice(row * width, (row + 1) * width),
    ]);
  for (const run of runs) {
    const r = run.rank;
    const got = run.result!.collectives as Record<string, { y: number[]; grad: number[] }>;
    const want: Record<string, { y: number[]; grad: number[] }> = {
      // [2, 4] → [2, 4]; dim 1 gathers to [2, 8] and scatters to [2, 2]; dim 0 gathers to [4, 4].
      allReduceIdentity: { y: add(x(0), x(1)), grad: w(r, 8) },
      identityAllReduce: { y: x(r), grad: add(w(0, 8), w(1, 8)) },
      allGatherReduceScatter: {
        y: catCols(x(0), x(1), 4),
        grad: cols(add(w(0, 16), w(1, 16)), 8, 4 * r, 4),
      },
      reduceScatterAllGather: {
        y: cols(add(x(0), x(1)), 4, 2 * r, 2),
        grad: catCols(w(0, 4), w(1, 4), 2),
      },
      allGatherSplit: { y: [...x(0), ...x(1)], grad: w(r, 16).slice(8 * r, 8 * r + 8) },
      splitAllGather: { y: cols(x(r), 4, 2 * r, 2), grad: catCols(w(0, 4), w(1, 4), 2) },
    };
    assert.deepEqual(Object.keys(got), Object.keys(want), `rank ${r}: collectives`);
    for (const [name, { y, grad }] of Object.entries(want)) {
      assert.deepEqual(got[name].y, y, `rank ${r}: ${name} forward`);
      assert.deepEqual(got[name].grad, grad, `rank ${r}: ${name} backward`);
    }
  }
}

function checkErrors(runs: RankResult[]): void {
  const expected: Record<string, RegExp> = {
    unknownName: /"transformer\.h\.\*\.attn\.c_atn" names no submodule of the GPT/,
    wrongType: /ColwiseParallel: transformer\.ln_f is a LayerNorm; .*supports nn\.Linear/,
    notDivisible: /0\.weight \[5,4\] cannot be split on dim 0 into 2 parts/,
    headsNotDivisible: /parallelizeGPT: nHead 1 is not divisible by the tensor-parallel size 2/,
    tiedUnstyled: /transformer\.wte\.weight is a shard .* transformer\.wte has no parallel style/,
    notAStyle: /the plan's "lm_head" is not a ParallelStyle/,
  };
  for (const run of runs) {
    const errors = run.result!.errors as Record<string, string>;
    assert.deepEqual(Object.keys(errors), Object.keys(expected), `rank ${run.rank}`);
    for (const [name, pattern] of Object.entries(expected)) {
      assert.match(errors[name], pattern, `rank ${run.rank}: ${name}`);
    }
  }
}

Deno.test("a rank killed inside a tensor-parallel forward makes the other fail in time, naming it, diagnosed through dist.diagnoseError", async () => {
  const timeoutMs = 4000;
  const started = performance.now();
  const runs = await runCase({ CASE: "kill", KILL_RANK: "1", TEST_TIMEOUT_MS: String(timeoutMs) });
  const elapsed = performance.now() - started;
  assert.equal(runs[1].signal, "SIGKILL", `rank 1: ${runs[1].stderr}`);
  const run = runs[0];
  assert.equal(run.code, 1, `rank 0: ${run.stderr}`);
  const error = String(run.result?.error);
  // The blocking gather's error is the transport's: shared memory (the default on one host)
  // names the process that died, Gloo (DTRAIN_SHM=0) the connection it lost. The worker's
  // dist.diagnoseError then adds the store's verdict and prints the flight recorder's analysis.
  const shm = Deno.env.get("DTRAIN_SHM") !== "0";
  assert.match(error, shm ? /rank 1 died/ : /connection to rank 1 failed/, `rank 0: ${error}`);
  assert.match(
    error,
    /rank 1 died \(left the store without reporting an error\)/,
    `rank 0: ${error}`,
  );
  assert.match(run.stderr, /^dtrain ledger \(rank 0\): .*rank 1/m, `rank 0: ${run.stderr}`);
  assert.match(run.stdout, /^failed in forward of step 1$/m, "rank 0 failed in the forward");
  assert.ok(run.elapsedMs - runs[1].elapsedMs < timeoutMs + 2000, "rank 0 took long");
  assert.ok(elapsed < 30_000, `took ${elapsed | 0} ms`);
});
