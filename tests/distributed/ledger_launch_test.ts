// The flight recorder under the launcher: after a rank is killed the launcher prints the
// diagnosis of the ledger files its ranks left in the log folder, and `deno task debug LOG_DIR`
// prints the same from the files alone; SIGUSR1 to the launcher dumps every rank's ledger while the
// job goes on.
import assert from "node:assert/strict";
import { runDeno, withTempDir } from "../_harness/processes.ts";
import { culprits, escape, launchLedgerWorkers, site } from "./_ledger.ts";

Deno.test("a killed rank: the launcher and `deno task debug LOG_DIR` name it and the line the others wait at", async () => {
  await withTempDir("dtrain_ledger_", async (logDir) => {
    let killed = false;
    const run = await launchLedgerWorkers(3, logDir, {
      timeoutMs: 30_000,
      env: { MODE: "loop", TEST_TIMEOUT_MS: "1500" },
      onLine: (line) => {
        const m = line.match(/^\[rank 1\] looping (\d+)$/);
        if (m && !killed) {
          killed = true;
          Deno.kill(Number(m[1]), "SIGKILL");
        }
      },
    });
    assert.ok(killed, `rank 1 never looped:\n${run.stderr}`);
    assert.equal(run.code, 1, run.stderr);
    const expected = new RegExp(
      `^rank 1 left no ledger \\(killed, or died before writing it\\); ranks 0, 2 wait for it ` +
        `in allReduce #\\d+ \\(${escape(site("loop"))}\\)$`,
    );
    const launched = culprits(run.stderr, "launch");
    assert.equal(launched.length, 1, run.stderr);
    assert.match(launched[0], expected);
    // The ranks said it too, in their own words (they knew from the store that rank 1 died).
    const ranks = culprits(run.stderr, "rank [02]");
    assert.ok(ranks.length >= 1, run.stderr);
    for (const c of ranks) {
      assert.match(c, /^rank 1 died; ranks 0, 2 wait for it in allReduce #\d+/);
    }

    const debug = await runDeno({ timeoutMs: 20_000, task: true, args: ["debug", logDir] });
    assert.equal(debug.code, 0, debug.stderr);
    assert.deepEqual(culprits(debug.stdout, "debug"), launched);
  });
});

Deno.test("SIGUSR1 to the launcher: every rank writes its ledger, the job goes on, the launcher names who is behind", async () => {
  await withTempDir("dtrain_ledger_", async (logDir) => {
    let signalled = false;
    let dumped = "";
    const run = await launchLedgerWorkers(2, logDir, {
      timeoutMs: 30_000,
      env: { MODE: "skip", SKIP_RANK: "1", TEST_TIMEOUT_MS: "20000" },
      onLine: (line, running) => {
        if (line === "[rank 1] skipping" && !signalled) {
          signalled = true;
          // Rank 0 is in its all-reduce by now or a moment later.
          setTimeout(() => running.kill("SIGUSR1"), 300);
        }
        if (line.includes("dtrain ledger (launch, SIGUSR1): ")) {
          dumped = line;
          // The job kept running: stop it now.
          running.kill("SIGTERM");
        }
      },
    });
    assert.ok(signalled, run.stderr);
    assert.equal(run.code, 143, run.stderr);
    assert.match(run.stderr, /launch: SIGUSR1: 2\/2 ledgers written to /);
    // The workers were asked through a file: SIGUSR1 would have opened Deno's inspector in them.
    assert.doesNotMatch(run.stdout + run.stderr, /\[rank \d\] Debugger listening/);
    const expected = `rank 1 never called allReduce #2 (${site("skipped")}); it is waiting in ` +
      `barrier #1 of group1 (${site("elsewhere")})`;
    assert.equal(culprits(dumped, "launch, SIGUSR1")[0], expected, dumped);
    // The pending all-reduce's stack is in rank 0's file.
    const file = JSON.parse(await Deno.readTextFile(`${logDir}/rank_0.ledger.json`));
    const pending = file.entries.filter((e: { finishedUs: number }) => e.finishedUs === 0);
    assert.equal(pending.length, 1);
    assert.match(pending[0].stack, new RegExp(escape(site("skipped"))));
  });
});
