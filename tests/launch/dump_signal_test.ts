// SIGUSR1 asks the launcher for a flight-recorder dump and must open nothing: from 2.9.2 Deno
// answers it by opening an unauthenticated V8 inspector on 127.0.0.1:9229, which any local user
// (here a real one, `nobody`) could use to run code as the job's user ([Note: SIGUSR1 never
// reaches the inspector] in src/launch/dump_signal.ts). Real launcher, real workers, real sockets.
import assert from "node:assert/strict";
import { markedProcesses, withTempDir } from "../_harness/processes.ts";
import { launchLedgerWorkers } from "../distributed/_ledger.ts";

const NOBODY = 65534;
const isRoot = Deno.uid() === 0;

/** The TCP ports each of `pids` listens on (`ss`, as root it sees every process). */
async function listeningPorts(pids: number[]): Promise<Map<number, number[]>> {
  const out = await new Deno.Command("ss", { args: ["-ltnpH"] }).output();
  const ports = new Map<number, number[]>(pids.map((p) => [p, []]));
  for (const line of new TextDecoder().decode(out.stdout).split("\n")) {
    const port = Number(line.split(/\s+/)[3]?.split(":").pop());
    for (const m of line.matchAll(/pid=(\d+)/g)) ports.get(Number(m[1]))?.push(port);
  }
  return ports;
}

/** What `nobody` gets for `GET /json/list` on 127.0.0.1:`port` (an inspector lists its targets). */
async function askAsNobody(port: number): Promise<string> {
  const script = `exec 3<>/dev/tcp/127.0.0.1/${port} || exit 0
printf 'GET /json/list HTTP/1.0\\r\\nHost: 127.0.0.1\\r\\n\\r\\n' >&3; timeout 2 cat <&3`;
  const out = await new Deno.Command("setpriv", {
    args: [`--reuid=${NOBODY}`, `--regid=${NOBODY}`, "--clear-groups", "bash", "-c", script],
    stdout: "piped",
    stderr: "null",
  }).output();
  return new TextDecoder().decode(out.stdout);
}

Deno.test({
  name:
    "SIGUSR1 to the launcher and its workers dumps the ledgers and opens no inspector a stranger could use",
  ignore: !isRoot,
  fn: async () => {
    await withTempDir("dtrain_dump_", async (logDir) => {
      let signalled = false;
      const seen: {
        checked?: Promise<{ job: number[]; ports: Map<number, number[]>; answers: string[] }>;
      } = {};
      const run = await launchLedgerWorkers(2, logDir, {
        timeoutMs: 40_000,
        env: { MODE: "skip", SKIP_RANK: "1", TEST_TIMEOUT_MS: "30000" },
        onLine: (line, running) => {
          if (line === "[rank 1] skipping" && !signalled) {
            signalled = true;
            // Past Deno's 500 ms grace in every process, after which it would open the inspector.
            setTimeout(() => {
              for (const p of markedProcesses(running.marker)) Deno.kill(p.pid, "SIGUSR1");
            }, 1000);
          }
          if (line.includes("dtrain ledger (launch, SIGUSR1): ") && seen.checked === undefined) {
            // Give a late inspector time to come up, then look at every socket of the job.
            seen.checked = (async () => {
              await new Promise((r) => setTimeout(r, 1000));
              const job = markedProcesses(running.marker).map((p) => p.pid);
              const ports = await listeningPorts(job);
              const all = [...new Set([...ports.values()].flat())];
              const answers = await Promise.all(all.map(askAsNobody));
              running.kill("SIGTERM");
              return { job, ports, answers };
            })();
          }
        },
      });
      assert.ok(signalled, run.stderr);
      assert.ok(seen.checked !== undefined, `no dump:\n${run.stderr}`);
      const { job, ports, answers } = await seen.checked;
      assert.equal(job.length, 3, `the launcher and 2 workers: ${job}`);
      assert.equal(run.code, 143, run.stderr);
      assert.match(run.stderr, /launch: SIGUSR1: 2\/2 ledgers written to /);
      assert.doesNotMatch(run.stdout + run.stderr, /Debugger listening/);
      for (const [pid, listened] of ports) {
        assert.ok(!listened.includes(9229), `pid ${pid} listens on 9229: ${listened}`);
      }
      for (const answer of answers) {
        assert.doesNotMatch(answer, /webSocketDebuggerUrl|devtools/, answer);
      }
    });
  },
});
