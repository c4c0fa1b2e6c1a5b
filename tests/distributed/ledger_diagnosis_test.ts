// The flight recorder's diagnosis across real rank processes: each failing rank prints one
// diagnosis whose first line names the culprit and the exact file:line of the calls involved.
import assert from "node:assert/strict";
import { runRanks } from "../_harness/ranks.ts";
import { culprits, escape, site, worker } from "./_ledger.ts";

Deno.test("a rank that skips an allReduce is named with the line it skipped and the line it waits at", async () => {
  const runs = await runRanks({
    worker,
    worldSize: 3,
    timeoutMs: 30_000,
    env: { MODE: "skip", SKIP_RANK: "2", TEST_TIMEOUT_MS: "1500" },
  });
  const expected = `rank 2 never called allReduce #2 (${site("skipped")}); it is waiting in ` +
    `barrier #1 of group1 (${site("elsewhere")})`;
  // Rank 2's own barrier times out too: every rank tells the same story.
  for (const r of runs) {
    assert.equal(r.code, 1, `rank ${r.rank}: ${r.stderr}`);
    const found = culprits(r.stderr);
    assert.equal(found.length, 1, `rank ${r.rank} printed ${found.length} diagnoses:\n${r.stderr}`);
    assert.equal(found[0], expected, `rank ${r.rank}:\n${r.stderr}`);
  }
});

Deno.test("two ranks calling collectives in different orders are named with both lines", async () => {
  const runs = await runRanks({
    worker,
    worldSize: 2,
    timeoutMs: 30_000,
    env: { MODE: "order", TEST_TIMEOUT_MS: "3000" },
  });
  const expected = `rank 1 called broadcast #1 (${site("first on 1")}) where rank 0 called ` +
    `allReduce #1 (${site("first on 0")})`;
  for (const r of runs) {
    assert.equal(r.code, 0, `rank ${r.rank}: ${r.stderr}`);
    assert.equal(culprits(r.stderr)[0], expected, `rank ${r.rank}:\n${r.stderr}`);
  }
});

Deno.test("a SIGSTOPped rank is named as not answering, the others waiting at the loop's line", async () => {
  let stopped = false;
  const reported = new Set<number>();
  const runs = await runRanks({
    worker,
    worldSize: 3,
    timeoutMs: 30_000,
    env: { MODE: "loop", TEST_TIMEOUT_MS: "1500" },
    onLine: (rank, line, procs) => {
      const victim = procs.find((p) => p.rank === 2)!;
      if (rank === 2 && line.startsWith("looping") && !stopped) {
        stopped = true;
        victim.child.kill("SIGSTOP");
      }
      if (rank !== 2 && line.startsWith("{")) {
        reported.add(rank);
        if (reported.size === 2) victim.child.kill("SIGKILL");
      }
    },
  });
  assert.ok(stopped, "rank 2 never reached its loop");
  const pattern = new RegExp(
    `^rank 2 did not answer \\(stopped, hung, or blocked outside JavaScript\\); ranks 0, 1 ` +
      `wait for it in allReduce #\\d+ \\(${escape(site("loop"))}\\)$`,
  );
  for (const r of runs.filter((r) => r.rank !== 2)) {
    assert.equal(r.code, 1, `rank ${r.rank}: ${r.stderr}`);
    assert.match(culprits(r.stderr)[0] ?? "", pattern, `rank ${r.rank}:\n${r.stderr}`);
  }
});

Deno.test("a bad DTRAIN_LEDGER makes initProcessGroup fail naming it and the value", async () => {
  const [run] = await runRanks({
    worker,
    worldSize: 1,
    timeoutMs: 30_000,
    env: { MODE: "order", DTRAIN_LEDGER: "lots" },
  });
  assert.equal(run.code, 1, run.stderr);
  assert.equal(
    run.result?.error,
    "initProcessGroup: DTRAIN_LEDGER must be a whole number of operations (0: off), got 'lots'",
  );
});
