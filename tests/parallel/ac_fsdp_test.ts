// Activation checkpointing composed with fullyShard (torchtitan's order: AC first, then fullyShard
// per block) on 2 real rank processes: the tiny GPT's losses, gradient shards and weights after 3
// AdamW steps equal the same run without AC, and one process on the whole batch.
import assert from "node:assert/strict";
import { assertAllOk, runRanks } from "../_harness/ranks.ts";
import { describe, markedProcesses, markerEnv } from "../_harness/processes.ts";
import { relativeError } from "../_harness/close.ts";

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

Deno.test("activation checkpointing then fullyShard per block on 2 ranks trains like no AC and like one process", async () => {
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
  for (const run of runs) {
    const r = run.result!;
    const plain = r.plain as Run, ac = r.checkpointed as Run;
    const what = `rank ${run.rank}`;
    assert.deepEqual(plain.wrapped, []);
    assert.deepEqual(ac.wrapped, ["transformer.h.0", "transformer.h.1"]);
    for (const [label, got] of [["AC", ac], ["no AC", plain]] as const) {
      got.losses.forEach((l, step) => {
        assert.ok(
          relativeError([l], [plain.losses[step]], "lengths", 1e-24) <= tolerance,
          `${what} ${label} loss`,
        );
      });
      assertClose(got.final, reference.final, tolerance, `${what} ${label} weights vs one process`);
      // This rank's gradient rows of the last step, against the same rows of one process's
      // (each rank's mean is over its rows; FSDP averages them, as one process's mean over all).
      for (const [name, { rowStart, rows, shape, values }] of Object.entries(got.grads)) {
        const rowNumel = shape.slice(1).reduce((a, b) => a * b, 1);
        const want = reference.grads[name].slice(rowStart * rowNumel, (rowStart + rows) * rowNumel);
        const err = relativeError(values.slice(0, want.length), want, "lengths", 1e-24);
        assert.ok(err <= tolerance, `${what} ${label}: gradient of ${name}, error ${err}`);
      }
    }
    // AC against no AC on the same rank: the same losses, gradients and weights.
    assertClose(ac.final, plain.final, tolerance, `${what} AC vs no AC weights`);
    for (const [name, g] of Object.entries(ac.grads)) {
      const err = relativeError(g.values, plain.grads[name].values, "lengths", 1e-24);
      assert.ok(err <= tolerance, `${what}: AC gradient of ${name}, error ${err}`);
    }
    assert.match(String(r.refused), /already fully sharded; apply activation checkpointing first/);
  }
});
