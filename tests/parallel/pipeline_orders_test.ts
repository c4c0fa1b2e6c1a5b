// The pipeline schedules' per-rank action lists against PyTorch 2.13's (fixture
// pipeline_orders.json from tests/fixtures/gen_pipeline_orders.py): what each rank of
// ScheduleGPipe, Schedule1F1B and ScheduleInterleaved1F1B really ran on 2 and 4 gloo processes,
// 8 microbatches, the schedules' pipeline_order IR, and _format_pipeline_order's table.
import assert from "node:assert/strict";
import {
  actionString,
  formatPipelineOrder,
  gpipeOrder,
  interleavedOrder,
  oneFOneBOrder,
  type PipelineOrder,
} from "../../src/parallel/pipelining/mod.ts";

interface OrderCase {
  schedule: "gpipe" | "1f1b" | "interleaved1f1b";
  ranks: number;
  stagesPerRank: number;
  nMicrobatches: number;
  pipelineOrder: string[][];
  executed: string[][];
  formatted: string;
}

const fixture = JSON.parse(
  Deno.readTextFileSync(new URL("../fixtures/pipeline_orders.json", import.meta.url)),
) as { torch: string; cases: OrderCase[] };

function ours(c: OrderCase): PipelineOrder {
  if (c.schedule === "gpipe") return gpipeOrder(c.ranks, c.nMicrobatches);
  if (c.schedule === "1f1b") return oneFOneBOrder(c.ranks, c.nMicrobatches);
  return interleavedOrder(c.ranks, c.stagesPerRank, c.nMicrobatches);
}

for (const c of fixture.cases) {
  const label = `${c.schedule} on ${c.ranks} ranks × ${c.stagesPerRank} stages`;
  Deno.test(`${label}, ${c.nMicrobatches} microbatches: each rank's actions are what PyTorch ran`, () => {
    const order = ours(c);
    const strings = order.map((actions) => actions.map(actionString));
    assert.deepEqual(strings, c.executed, `${label}: executed order`);
    assert.equal(formatPipelineOrder(order), c.formatted, `${label}: table`);
    if (c.schedule !== "1f1b") {
      assert.deepEqual(strings, c.pipelineOrder, `${label}: pipeline_order IR`);
      return;
    }
    // Schedule1F1B's IR numbers the last rank's forwards one ahead of what it runs (its warm-up
    // loop is empty there); every other rank's IR is what it runs.
    const last = c.ranks - 1;
    assert.deepEqual(strings.slice(0, last), c.pipelineOrder.slice(0, last), `${label}: IR`);
    const shifted = order[last].map((a) =>
      actionString(a.type === "F" ? { ...a, microbatch: a.microbatch + 1 } : a)
    );
    assert.deepEqual(shifted, c.pipelineOrder[last], `${label}: the last rank's IR`);
  });
}

Deno.test("every stage runs each microbatch's forward once, then its backward once", () => {
  for (const order of [gpipeOrder(3, 5), oneFOneBOrder(3, 5), interleavedOrder(3, 2, 6)]) {
    const seen = new Map<string, number>();
    order.forEach((actions, rank) => {
      for (const a of actions) {
        assert.equal(a.stage % order.length, rank, `stage ${a.stage} on rank ${rank}`);
        const key = `${a.stage}:${a.microbatch}`;
        const before = seen.get(key) ?? 0;
        assert.equal(before, a.type === "F" ? 0 : 1, `${actionString(a)} out of turn`);
        seen.set(key, before + 1);
      }
    });
    assert.ok([...seen.values()].every((n) => n === 2));
  }
});

Deno.test("the schedules refuse bad sizes, naming the value", () => {
  assert.throws(
    () => gpipeOrder(0, 4),
    /ScheduleGPipe: numStages must be a positive integer, got 0/,
  );
  assert.throws(() => gpipeOrder(2, 1.5), /nMicrobatches must be a positive integer, got 1.5/);
  assert.throws(
    () => oneFOneBOrder(4, 3),
    /Schedule1F1B: nMicrobatches \(3\) must be at least the number of stages \(4\)/,
  );
  assert.throws(
    () => interleavedOrder(4, 2, 9),
    /nMicrobatches \(9\) must be a multiple of the number of rounds \(2\)/,
  );
  assert.throws(() => interleavedOrder(2, 0, 4), /stagesPerRank must be a positive integer, got 0/);
});
