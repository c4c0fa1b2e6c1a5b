// DiLoCo through fault-tolerant replicas (tests/parallel/workers/ft_diloco.ts): a replica
// SIGKILLed before its outer step fails that sync everywhere (the survivors drop the period's
// inner steps and keep θ), the survivors redo the outer step as a quorum of two, a replacement
// heals at a later sync, and all end with equal θ; no sample is taken twice.
import assert from "node:assert/strict";
import { runRanks } from "../_harness/ranks.ts";
import {
  checkSamples,
  eventsOf,
  parse,
  releaseOnceEntered,
  replicaEnv,
  signal,
  withStore,
} from "./_ft_events.ts";

const worker = new URL("./workers/ft_diloco.ts", import.meta.url);

Deno.test("DiLoCo with a Manager: a replica killed before the outer step fails the sync, the survivors redo it without it, and a replacement heals; all end with equal θ", async () => {
  const STEPS = 6, KILL_AT = 1, PAUSE_AT = 3;
  await withStore(async (port, client) => {
    const connected = new Set<number>();
    let killed = false;
    const base = replicaEnv(port, STEPS);
    const results = await runRanks({
      worker,
      worldSize: 4,
      timeoutMs: 60_000,
      env: (r) =>
        r === 3
          ? { ...base(r), H: "2", WAIT_KEY: "test/replace", START_KEY: "" }
          : { ...base(r), H: "2", PAUSE_AT: String(PAUSE_AT), PAUSE_KEY: "test/joining" },
      onLine: (rank, line, procs) => {
        const e = parse(line);
        if (e?.event === "connected") connected.add(rank);
        if (connected.size === 3) client.set("test/start", "1");
        if (rank === 3 && e?.event === "connected") releaseOnceEntered(client, 3, "test/joining");
        if (!killed && rank === 1 && e?.event === "computed" && e.step === KILL_AT) {
          // Its first inner step of the outer step: the sync it would join has not started.
          killed = true;
          signal(procs, 1, "SIGKILL");
          client.set("test/replace", "1");
        }
      },
    });
    assert.ok(killed, "replica 1 never reached the step it was to be killed at");
    for (const r of [0, 2, 3]) {
      assert.equal(results[r].code, 0, `replica ${r}: ${results[r].stderr.slice(-2000)}`);
    }
    const events = eventsOf(results);
    // The kill lands before replica 1's sync of step KILL_AT, or (a slow signal) of the next.
    const aborted = events.filter((e) => e.event === "abort" && e.replica !== 1);
    const failed = aborted[0]?.step;
    assert.ok(
      failed === KILL_AT || failed === KILL_AT + 1,
      `failed syncs: ${JSON.stringify(events)}`,
    );
    assert.deepEqual(aborted.map((e) => e.step), [failed, failed], "one failed sync each");
    const retried = events.filter((e) => e.event === "commit" && e.step === failed);
    // Redone by the survivors (the replacement may already be among them).
    assert.ok(retried.length >= 2, `step ${failed} committed by ${retried.length}`);
    for (const e of retried) {
      assert.ok(e.members!.includes(0) && e.members!.includes(2) && !e.members!.includes(1));
    }
    // The replacement healed at a sync (θ, the outer momentum, the inner AdamW) and took part.
    const [zero, , two, three] = results.map((r) => r.result!);
    assert.ok(
      (three.healedAtStep as number) >= KILL_AT,
      `healed at ${three.healedAtStep}: ${
        JSON.stringify(events.filter((e) => e.event !== "computed"))
      }`,
    );
    assert.ok(events.some((e) => e.replica === 3 && e.event === "commit"));
    assert.deepEqual(two.theta, zero.theta, "θ of replica 2 differs");
    assert.deepEqual(three.theta, zero.theta, "θ of the replacement differs");
    checkSamples(events, STEPS);
  });
});
