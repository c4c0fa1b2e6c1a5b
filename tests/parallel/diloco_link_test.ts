// DiLoCo over a slow, distant link (tests/_harness/throttled_link.ts: 100 Mbit/s, a 50 ms round
// trip): two replicas, one per host, start from different weights, train a few outer steps and
// end with the same weights bit for bit, having lowered the loss over both replicas' rows;
// each outer step crossed the link (it took at least a round trip). Needs root; skipped where
// the link cannot be made.
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { LINK_SKIP, ThrottledLink } from "../_harness/throttled_link.ts";
import { tail } from "../infrastructure/netns_cluster.ts";

const WORKER = fileURLToPath(new URL("./workers/diloco_link.ts", import.meta.url));
const RUN_TIMEOUT_MS = 40_000;
const H = 5, ROUNDS = 4;
/** The MLP's (8 → 16 → 16 → 4) parameter count, and its f32 bytes. */
const NUMEL = 484;

if (LINK_SKIP !== null) console.warn(`diloco_link_test.ts: skipping: ${LINK_SKIP}`);

interface Result {
  final: Record<string, number[]>;
  lossBefore: number;
  lossAfter: number;
  syncs: { bytes: number; ms: number }[];
}

Deno.test({
  name:
    "DiLoCo on two replicas across a throttled link (100 Mbit/s, 50 ms round trip) trains, and both replicas end with the same weights",
  ignore: LINK_SKIP !== null,
  async fn() {
    await using link = await ThrottledLink.create();
    const runs = await link.runRanks(
      [WORKER],
      { H: String(H), ROUNDS: String(ROUNDS) },
      RUN_TIMEOUT_MS,
    );
    const [a, b] = runs.map((run) => {
      assert.equal(run.code, 0, `rank ${run.host}:\n${tail(run.stdout + run.stderr, 30)}`);
      return JSON.parse(run.stdout.trim().split("\n").at(-1)!) as Result;
    });
    assert.deepEqual(b.final, a.final, "the replicas' weights differ after the last outer step");
    assert.ok(
      a.lossAfter < a.lossBefore - 0.01,
      `training loss ${a.lossBefore.toFixed(4)} → ${a.lossAfter.toFixed(4)}: no training`,
    );
    for (const [rank, result] of [a, b].entries()) {
      assert.equal(result.syncs.length, ROUNDS, `rank ${rank}'s outer steps`);
      for (const sync of result.syncs) {
        // At least the pseudo-gradient's share a ring all-reduce sends (half, twice).
        assert.ok(sync.bytes >= NUMEL * 4, `rank ${rank} sent ${sync.bytes} bytes in a sync`);
        assert.ok(
          sync.ms >= 45,
          `rank ${rank}: an outer step took ${sync.ms.toFixed(1)} ms, under the 50 ms round trip`,
        );
      }
      console.log(
        `rank ${rank}: loss ${result.lossBefore.toFixed(4)} → ${result.lossAfter.toFixed(4)}; ` +
          `outer steps ${result.syncs.map((s) => `${s.ms.toFixed(0)} ms/${s.bytes} B`).join(", ")}`,
      );
    }
  },
});
