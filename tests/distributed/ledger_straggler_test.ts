// Straggler attribution across real rank processes: a rank that sleeps before each all-reduce is
// named by every rank as the one arriving last, its mean lag within 20% of the sleep, and rank 0
// prints the line with the collective's exact file:line.
import assert from "node:assert/strict";
import { runRanks } from "../_harness/ranks.ts";
import { escape, site, worker } from "./_ledger.ts";

const SLEEP_MS = 150;

Deno.test(`a rank sleeping ${SLEEP_MS} ms before each allReduce is the straggler, lag within 20%`, async () => {
  const runs = await runRanks({
    worker,
    worldSize: 3,
    timeoutMs: 30_000,
    env: { MODE: "straggle", SLOW_RANK: "2", SLEEP_MS: String(SLEEP_MS) },
  });
  for (const r of runs) {
    assert.equal(r.code, 0, `rank ${r.rank}: ${r.stderr}`);
    const report = r.result?.report as { rank: number; meanLagMs: number; collectives: number };
    assert.equal(report.rank, 2, `rank ${r.rank}: ${JSON.stringify(report)}`);
    assert.equal(report.collectives, 12);
    const off = Math.abs(report.meanLagMs - SLEEP_MS) / SLEEP_MS;
    assert.ok(off <= 0.2, `rank ${r.rank}: lag ${report.meanLagMs} ms for a ${SLEEP_MS} ms sleep`);
  }
  const line = runs[0].stdout.split("\n").find((l) => l.startsWith("step 12: straggler: "));
  assert.match(
    line ?? runs[0].stdout,
    new RegExp(
      `^step 12: straggler: rank 2 arrives \\d+\\.\\d ms after the first on average over the ` +
        `last 12 collectives, latest at allReduce #\\d+ \\(${escape(site("straggled"))}\\)$`,
    ),
  );
  for (const r of runs.slice(1)) assert.ok(!r.stdout.includes("straggler:"), `rank ${r.rank}`);
});
