// The pipeline's shared time steps ([Note: pipeline time steps] in
// src/parallel/pipelining/_timeline.ts), for GPipe, 1F1B and Interleaved 1F1B (2 and 3 stages a
// rank) on 2 to 4 ranks and 1 to 12 microbatches: every rank runs its own order, every message is
// needed only in a step after the one that sends it, and on a model of NCCL (a rank's groups run
// one at a time, a send waits for its receive, a pair's messages match in order) the exchange's
// batches, a step's headers then its payloads, all complete; posting each message in a group of
// its own when it is made or needed, as the schedules did before, deadlocks 1F1B there.
import assert from "node:assert/strict";
import {
  gpipeOrder,
  interleavedOrder,
  oneFOneBOrder,
  type PipelineOrder,
} from "../../src/parallel/pipelining/mod.ts";
import {
  messageFor,
  messageKey,
  messageOf,
  pipelineTimeline,
} from "../../src/parallel/pipelining/_timeline.ts";

/** A message a rank sends or receives, posted as part of a group. */
interface Op {
  send: boolean;
  peer: number;
  key: string;
}

/**
 * Runs every rank's groups one at a time, each op ending once the other side has posted its
 * counterpart: the k-th message from one rank to another is the sender's k-th send to it and the
 * receiver's k-th receive from it (which must be the same message). Returns the ranks left
 * waiting, none when everything completes.
 */
function runOnSerialTransport(groups: Op[][][]): number[] {
  // Each op's place among its pair's messages, and the group that posts it.
  const place = new Map<Op, string>(), where = new Map<string, [number, number, Op]>();
  groups.forEach((list, rank) => {
    const counts = new Map<string, number>();
    list.forEach((group, g) =>
      group.forEach((op) => {
        const pair = op.send ? `${rank}>${op.peer}` : `${op.peer}>${rank}`;
        const k = counts.get(`${op.send}${pair}`) ?? 0;
        counts.set(`${op.send}${pair}`, k + 1);
        place.set(op, `${pair}#${k}`);
        where.set(`${op.send}${pair}#${k}`, [rank, g, op]);
      })
    );
  });
  const at = groups.map(() => 0);
  for (let moved = true; moved;) {
    moved = false;
    groups.forEach((list, rank) => {
      const group = list[at[rank]];
      if (group === undefined) return;
      const ended = group.every((op) => {
        const other = where.get(`${!op.send}${place.get(op)}`);
        if (other === undefined) return false;
        assert.equal(other[2].key, op.key, `rank ${rank}: ${op.key} meets ${other[2].key}`);
        return other[1] <= at[other[0]];
      });
      if (ended) [at[rank], moved] = [at[rank] + 1, true];
    });
  }
  return groups.flatMap((list, rank) => at[rank] < list.length ? [rank] : []);
}

/**
 * The exchange's batches on each rank: per step, its activations' headers, then the payloads (in
 * one batch when it receives no header).
 */
function timeStepGroups(order: PipelineOrder, numStages: number): Op[][][] {
  const ranks = order.length, { actions } = pipelineTimeline(order, numStages);
  return actions.map((_, me) =>
    actions[me].flatMap((_, step) => {
      const headers: Op[] = [], payloads: Op[] = [];
      actions.forEach((list, peer) => {
        const a = list[step], m = a === null ? null : messageOf(a, numStages);
        if (m === null || peer === m.stage % ranks) return;
        const send = peer === me, to = m.stage % ranks;
        if (!send && to !== me) return;
        const op = { send, peer: send ? to : peer, key: messageKey(m) };
        if (m.kind === "A") headers.push({ ...op, key: `header ${op.key}` });
        payloads.push(op);
      });
      // Without a header to wait for, the payloads go in the headers' turn (one NCCL group).
      const batches = headers.some((op) => !op.send)
        ? [headers, payloads]
        : [[...headers, ...payloads]];
      return batches.filter((g) => g.length > 0);
    })
  );
}

/** Each message in a group of its own, received when needed and sent when made. */
function oneByOneGroups(order: PipelineOrder, numStages: number): Op[][][] {
  const ranks = order.length;
  return order.map((list, me) =>
    list.flatMap((a) => {
      const groups: Op[][] = [], need = messageFor(a, numStages), made = messageOf(a, numStages);
      if (need !== null && (need.stage + (need.kind === "A" ? -1 : 1)) % ranks !== me) {
        const from = (need.stage + (need.kind === "A" ? -1 : 1)) % ranks;
        groups.push([{ send: false, peer: from, key: messageKey(need) }]);
      }
      if (made !== null && made.stage % ranks !== me) {
        groups.push([{ send: true, peer: made.stage % ranks, key: messageKey(made) }]);
      }
      return groups;
    })
  );
}

/** Every schedule this test lays out: name, order, number of stages. */
function schedules(): [string, PipelineOrder, number][] {
  const cases: [string, PipelineOrder, number][] = [];
  for (const ranks of [2, 3, 4]) {
    for (const m of [1, 2, 3, 4, 6, 8, 12]) {
      cases.push([`gpipe ${ranks}×${m}`, gpipeOrder(ranks, m), ranks]);
      if (m >= ranks) cases.push([`1f1b ${ranks}×${m}`, oneFOneBOrder(ranks, m), ranks]);
      for (const per of [2, 3]) {
        const rounds = Math.max(1, Math.floor(m / ranks));
        if (m % rounds !== 0) continue;
        const name = `interleaved ${ranks}×${m}, ${per} stages a rank`;
        cases.push([name, interleavedOrder(ranks, per, m), ranks * per]);
      }
    }
  }
  return cases;
}

Deno.test("pipelineTimeline: every rank runs its own order, each action a step after what it needs was sent", () => {
  for (const [name, order, numStages] of schedules()) {
    const { steps, actions } = pipelineTimeline(order, numStages);
    const sentAt = new Map<string, number>();
    actions.forEach((list) => {
      assert.equal(list.length, steps, name);
      list.forEach((a, step) => {
        const m = a === null ? null : messageOf(a, numStages);
        if (m !== null) sentAt.set(messageKey(m), step);
      });
    });
    actions.forEach((list, rank) => {
      assert.deepEqual(list.filter((a) => a !== null), order[rank], `${name}: rank ${rank}`);
      list.forEach((a, step) => {
        const need = a === null ? null : messageFor(a, numStages);
        if (need !== null) assert.ok(sentAt.get(messageKey(need))! < step, `${name}: ${step}`);
      });
    });
  }
});

Deno.test("pipeline messages in shared time steps complete on a transport that runs a rank's groups one at a time (NCCL's); one group a message deadlocks 1F1B there", () => {
  let deadlocked = 0;
  for (const [name, order, numStages] of schedules()) {
    assert.deepEqual(runOnSerialTransport(timeStepGroups(order, numStages)), [], name);
    if (name.startsWith("1f1b")) {
      deadlocked += runOnSerialTransport(oneByOneGroups(order, numStages)).length > 0 ? 1 : 0;
    }
  }
  assert.ok(deadlocked > 0, "the model of the transport finds the old deadlock");
});

Deno.test("pipelineTimeline refuses an order whose action waits for a message no rank sends", () => {
  const order: PipelineOrder = [
    [{ type: "F", stage: 0, microbatch: 0 }, { type: "B", stage: 0, microbatch: 0 }],
    [{ type: "F", stage: 1, microbatch: 1 }],
  ];
  assert.throws(
    () => pipelineTimeline(order, 2),
    /the order cannot go on: rank 0 at 0B0 waits for G0:0; rank 1 at 1F1 waits for A1:1, which no rank sends/,
  );
});
