// DiLoCo through fault-tolerant replicas (tests/parallel/workers/ft_diloco.ts): a replica
// SIGKILLed before its outer step fails that sync everywhere (the survivors drop the period's
// inner steps and keep θ), the survivors redo the outer step as a quorum of two and end with
// equal θ; no sample is taken twice.
import assert from "node:assert/strict";
import { runRanks } from "../_harness/ranks.ts";
import { checkSamples, eventsOf, parse, replicaEnv, signal, withStore } from "./_ft_events.ts";

const worker = new URL("./workers/ft_diloco.ts", import.meta.url);

Deno.test("DiLoCo with a Manager: a replica killed before the outer step fails the sync, the survivors redo it without it and end with equal θ", async () => {
  const STEPS = 4, KILL_AT = 1;
  await withStore(async (port, client) => {
    const connected = new Set<number>();
    let killed = false;
    const results = await runRanks({
      worker,
      worldSize: 3,
      timeoutMs: 60_000,
      env: (r) => ({ ...replicaEnv(port, STEPS)(r), H: "2" }),
      onLine: (rank, line, procs) => {
        const e = parse(line);
        if (e?.event === "connected") connected.add(rank);
        if (connected.size === 3) client.set("test/start", "1");
        if (!killed && rank === 1 && e?.event === "computed" && e.step === KILL_AT) {
          // Its first inner step of the outer step: the sync it would join has not started.
          killed = true;
          signal(procs, 1, "SIGKILL");
        }
      },
    });
    assert.ok(killed, "replica 1 never reached the step it was to be killed at");
    for (const r of [0, 2]) {
      assert.equal(results[r].code, 0, `replica ${r}: ${results[r].stderr.slice(-2000)}`);
    }
    const events = eventsOf(results);
    // The kill lands before replica 1's sync of step KILL_AT, or (a slow signal) of the next.
    const aborted = events.filter((e) => e.event === "abort" && e.replica !== 1);
    const failed = aborted[0]?.step;
    assert.ok(
      failed === KILL_AT || failed === KILL_AT + 1,
      `failed syncs: ${JSON.stringify(aborted)}`,
    );
    assert.deepEqual(
      aborted.map((e) => e.step),
      [failed, failed],
      `one failed sync each: ${JSON.stringify(events)}`,
    );
    const retried = events.filter((e) => e.event === "commit" && e.step === failed);
    assert.deepEqual(retried.map((e) => e.members), [[0, 2], [0, 2]]);
    assert.deepEqual(results[2].result!.theta, results[0].result!.theta, "θ differs");
    checkSamples(events, STEPS);
  });
});
