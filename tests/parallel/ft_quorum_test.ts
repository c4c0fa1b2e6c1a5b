// The quorum rounds and the commit vote against a real store, with clients in one process: the
// first round waits for every live replica, a member whose connection closes is left out at once
// and the quorum id changes, one "no" aborts the step for every member, and old rounds' keys are
// deleted without stranding a replica that comes back to one.
import assert from "node:assert/strict";
import { StoreClient } from "../../src/distributed/store/client.ts";
import { StoreServer } from "../../src/distributed/store/server.ts";
import {
  joinQuorum,
  LIVENESS_RANK_BASE,
  QuorumKeys,
  voteCommit,
} from "../../src/parallel/ft/quorum.ts";
import { within } from "../_harness/within.ts";

const TOKEN = "ft-quorum-test";
const keys = new QuorumKeys("q/");
const timeouts = { minReplicas: 1, joinTimeoutMs: 5_000, quorumTimeoutMs: 10_000 };
const member = (replicaId: number, step = 0) => ({ replicaId, step, errored: false });

Deno.test("quorum: rounds among live replicas, a closed one left out at once, and the commit vote", async () => {
  const server = StoreServer.listen({ hostname: "127.0.0.1", port: 0, token: TOKEN });
  const connect = (id: number) =>
    StoreClient.connect({
      hostname: "127.0.0.1",
      port: server.port,
      token: TOKEN,
      rank: LIVENESS_RANK_BASE + id,
    });
  const [a, b] = [await connect(0), await connect(1)];
  try {
    const first = await within(
      Promise.all([
        joinQuorum(a, keys, member(0), 1, timeouts),
        joinQuorum(b, keys, member(1), 1, timeouts),
      ]),
      4_000,
      "the first round",
    );
    assert.deepEqual(first[0], first[1]);
    assert.deepEqual(first[0].members.map((m) => m.replicaId), [0, 1]);
    const votes = await Promise.all([
      voteCommit(a, keys, first[0], 0, true, 2_000),
      voteCommit(b, keys, first[0], 1, false, 2_000),
    ]);
    assert.deepEqual(votes, [false, false], "one no aborts the step everywhere");
    b.close();
    // Replica 1 is gone: the next round does not wait the 5 s join timeout for it.
    const second = await within(joinQuorum(a, keys, member(0, 1), 2, timeouts), 2_000, "round 2");
    assert.deepEqual(second.members.map((m) => m.replicaId), [0]);
    assert.notEqual(second.quorumId, first[0].quorumId);
    assert.equal(await voteCommit(a, keys, second, 0, true, 2_000), true);
    const third = await joinQuorum(a, keys, member(0, 2), 3, timeouts);
    assert.equal(third.quorumId, second.quorumId, "the same members keep their communicator");
    // Each decider forgets the round two before its own: the store holds a bounded set of keys.
    const held: number[] = []; // round 4 forgets round 2, which had another shape
    for (let round = 4; round <= 9; round++) {
      const q = await joinQuorum(a, keys, member(0, round - 1), round, timeouts);
      assert.equal(await voteCommit(a, keys, q, 0, true, 2_000), true);
      held.push(await a.numKeys());
    }
    assert.equal(new Set(held.slice(1)).size, 1, `keys held after rounds 4..9: ${held}`);
    // A replica that comes back to a forgotten round goes to the one after the last decided.
    const stale = await joinQuorum(a, keys, member(0, 1), 2, timeouts);
    assert.equal(stale.round, 10);
  } finally {
    a.close();
    b.close();
    await server.close();
  }
});

Deno.test("quorum: a member alone never goes on while the rest of its last quorum lives (no split brain)", async () => {
  const server = StoreServer.listen({ hostname: "127.0.0.1", port: 0, token: TOKEN });
  const connect = (id: number) =>
    StoreClient.connect({
      hostname: "127.0.0.1",
      port: server.port,
      token: TOKEN,
      rank: LIVENESS_RANK_BASE + id,
    });
  const [a, b] = [await connect(0), await connect(1)];
  const quick = { minReplicas: 1, joinTimeoutMs: 100, quorumTimeoutMs: 10_000 };
  try {
    await Promise.all([
      joinQuorum(a, keys, member(0), 1, quick),
      joinQuorum(b, keys, member(1), 1, quick),
    ]);
    // Replica 1 lives but is busy: replica 0 waits past its join timeout for it.
    let alone = false;
    const next = joinQuorum(a, keys, member(0, 1), 2, quick).then((q) => (alone = true, q));
    await new Promise((r) => setTimeout(r, 500));
    assert.equal(alone, false, "replica 0 made a quorum of itself beside a live replica 1");
    const both = await Promise.all([next, joinQuorum(b, keys, member(1, 1), 2, quick)]);
    assert.deepEqual(both[0].members.map((m) => m.replicaId), [0, 1]);
    assert.deepEqual(both[0], both[1]);
  } finally {
    a.close();
    b.close();
    await server.close();
  }
});
