// `deno task debug LOG_DIR` on what a real job left: a rank SIGKILLed before it could write a
// ledger is named as the culprit even when it is the highest rank (no file tells the world size
// but the others' groups), and every ledger file it cannot use is named with what is wrong with it
// (not JSON, wrong types, a rank outside the job, not a regular file), never read as absent and
// never hung on (src/distributed/ledger_read.ts).
import assert from "node:assert/strict";
import { join } from "node:path";
import { ROOT, runDeno, withTempDir } from "../_harness/processes.ts";
import { culprits, escape, launchLedgerWorkers, site } from "./_ledger.ts";

const debug = (dir: string) =>
  runDeno({ timeoutMs: 20_000, args: [`${ROOT}src/launch/debug.ts`, dir] });

Deno.test("deno task debug names the highest rank killed without a ledger, and every unusable ledger file", async () => {
  await withTempDir("dtrain_ledger_debug_", async (logDir) => {
    let killed = false;
    const run = await launchLedgerWorkers(3, logDir, {
      timeoutMs: 30_000,
      env: { MODE: "loop", TEST_TIMEOUT_MS: "1500" },
      onLine: (line) => {
        const m = line.match(/^\[rank 2\] looping (\d+)$/);
        if (m && !killed) {
          killed = true;
          Deno.kill(Number(m[1]), "SIGKILL");
        }
      },
    });
    assert.ok(killed, `rank 2 never looped:\n${run.stderr}`);
    assert.equal(run.code, 1, run.stderr);
    const left = [...Deno.readDirSync(logDir)].map((e) => e.name).filter((n) =>
      n.endsWith(".json")
    );
    assert.deepEqual(left.sort(), ["rank_0.ledger.json", "rank_1.ledger.json"]);

    const whole = await debug(logDir);
    assert.equal(whole.code, 0, whole.stderr);
    assert.match(
      culprits(whole.stdout, "debug")[0] ?? "",
      new RegExp(
        `^rank 2 left no ledger \\(killed, or died before writing it\\); ranks 0, 1 wait for it ` +
          `in allReduce #\\d+ \\(${escape(site("loop"))}\\)$`,
      ),
      whole.stdout,
    );

    // Rank 1's file spoilt in turn: each is named, with what is wrong, and rank 1 counts as silent.
    const good = Deno.readTextFileSync(join(logDir, "rank_1.ledger.json"));
    const spoilt = JSON.parse(good);
    spoilt.summary.groups = "none";
    const cases: [string, string, RegExp][] = [
      ["garbage", good.slice(0, good.length / 2), /rank_1\.ledger\.json: is not valid JSON \(/],
      [
        "wrong types",
        JSON.stringify(spoilt),
        /rank_1\.ledger\.json: has no object 'summary\.groups'/,
      ],
    ];
    for (const [what, body, named] of cases) {
      Deno.writeTextFileSync(join(logDir, "rank_1.ledger.json"), body);
      const out = await debug(logDir);
      assert.equal(out.code, 0, `${what}: ${out.stderr}`);
      assert.match(out.stdout, named, what);
      assert.match(
        culprits(out.stdout, "debug")[0] ?? "",
        /^ranks 1, 2 left no usable ledger .*; rank 0 waits for them in allReduce/,
        `${what}: ${out.stdout}`,
      );
    }
    Deno.writeTextFileSync(join(logDir, "rank_1.ledger.json"), good);

    // A huge rank and a FIFO under a ledger's name: named, no "Invalid array length", no hang.
    Deno.writeTextFileSync(join(logDir, "rank_99999999999.ledger.json"), good);
    const fifo = await new Deno.Command("mkfifo", { args: [join(logDir, "rank_5.ledger.json")] })
      .output();
    assert.ok(fifo.success);
    const odd = await debug(logDir);
    assert.equal(odd.code, 0, odd.stderr);
    assert.match(odd.stdout, /rank_5\.ledger\.json: is not a regular file/);
    assert.match(odd.stdout, /rank_99999999999\.ledger\.json: says it is rank 1, its name rank/);
    assert.match(culprits(odd.stdout, "debug")[0] ?? "", /^rank 2 left no usable ledger/);
  });
});
