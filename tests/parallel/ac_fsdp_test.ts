// Activation checkpointing composed with fullyShard on 2 real rank processes, in both orders
// (torchtitan's, AC first, then fullyShard per block; and fullyShard first, whose groups gather
// before the recompute in backward), with two fully sharded modules inside each checkpointed
// block, and with those two checkpointed as well (nested regions): the tiny GPT's losses, gradient shards and weights after 3 AdamW steps equal the same
// run without AC, and one process on the whole batch.
import assert from "node:assert/strict";
import { assertAllOk, runRanks } from "../_harness/ranks.ts";
import { describe, markedProcesses, markerEnv } from "../_harness/processes.ts";
import { relativeError } from "../_harness/close.ts";
import type { Order } from "./workers/ac_fsdp.ts";

const worker = new URL("./workers/ac_fsdp.ts", import.meta.url);

type Values = Record<string, number[]>;
interface Run {
  wrapped: string[];
  losses: number[];
  grads: Record<string, { rowStart: number; rows: number; shape: number[]; values: number[] }>;
  final: Values;
}

/** ‖got − want‖ / ‖want‖ of one tensor's values. */
function assertClose(got: Values, want: Values, tolerance: number, what: string): void {
  assert.deepEqual(Object.keys(got).sort(), Object.keys(want).sort(), `${what}: names`);
  for (const [name, w] of Object.entries(want)) {
    const err = relativeError(got[name], w, "lengths", 1e-24);
    assert.ok(err <= tolerance, `${what}: ${name} has relative error ${err}`);
  }
}

Deno.test("activation checkpointing before or after fullyShard (per block, or per attention and MLP inside each checkpointed block) on 2 ranks trains like no AC and like one process", async () => {
  const marker = crypto.randomUUID();
  const runs = await runRanks({
    worker,
    worldSize: 2,
    timeoutMs: 60_000,
    env: () => markerEnv(marker),
  });
  const left = markedProcesses(marker);
  assert.deepEqual(left, [], `left behind: ${describe(left)}`);
  assertAllOk(runs);
  const reference = runs[0].result!.reference as { losses: number[]; grads: Values; final: Values };
  const tolerance = 1e-5;
  const wrapped = ["transformer.h.0", "transformer.h.1"];
  for (const run of runs) {
    const r = run.result!.runs as Record<Order, Run>;
    const plain = r.none, what = `rank ${run.rank}`;
    assert.deepEqual(plain.wrapped, []);
    for (const order of ["none", "acFirst", "fsdpFirst", "fsdpInside", "nested"] as const) {
      const got = r[order];
      const label = `${what} ${order}`;
      assert.deepEqual(got.wrapped, order === "none" ? [] : wrapped, `${label}: blocks wrapped`);
      got.losses.forEach((l, step) => {
        const err = relativeError([l], [plain.losses[step]], "lengths", 1e-24);
        assert.ok(err <= tolerance, `${label}: loss ${step} ${l} vs ${plain.losses[step]}`);
      });
      assertClose(got.final, reference.final, tolerance, `${label} weights vs one process`);
      // This rank's gradient rows of the last step, against the same rows of one process's
      // (each rank's mean is over its rows; FSDP averages them, as one process's mean over all).
      for (const [name, { rowStart, rows, shape, values }] of Object.entries(got.grads)) {
        const rowNumel = shape.slice(1).reduce((a, b) => a * b, 1);
        const want = reference.grads[name].slice(rowStart * rowNumel, (rowStart + rows) * rowNumel);
        const err = relativeError(values.slice(0, want.length), want, "lengths", 1e-24);
        assert.ok(err <= tolerance, `${label}: gradient of ${name}, error ${err}`);
      }
      if (order === "none" || order === "fsdpInside" || order === "nested") continue;
      // AC against no AC on the same rank, with the same FSDP groups: the same losses, gradients
      // and weights.
      assertClose(got.final, plain.final, tolerance, `${label} vs no AC: weights`);
      for (const [name, g] of Object.entries(got.grads)) {
        const err = relativeError(g.values, plain.grads[name].values, "lengths", 1e-24);
        assert.ok(err <= tolerance, `${label} vs no AC: gradient of ${name}, error ${err}`);
      }
    }
  }
});
