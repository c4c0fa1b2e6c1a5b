// The store under a hostile crowd and a hostile network: idle connections by the thousand
// against a store host with a low file limit, a recording proxy between the ranks and the store,
// and a fake store on the master port. Real processes, 127.0.0.1 only.
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { StoreServer } from "../../src/distributed/store/server.ts";
import {
  CHALLENGE_BYTES,
  HELLO_BYTES,
  NONCE_BYTES,
  PROOF_BYTES,
  RESPONSE_BYTES,
} from "../../src/distributed/store/auth.ts";
import { VERSION } from "../../src/distributed/store/protocol.ts";
import { collectLines } from "../_harness/lines.ts";
import { assertAllOk, freePort, runRanks } from "../_harness/ranks.ts";
import { within } from "../_harness/within.ts";

const FAULTS = new URL("./workers/faults.ts", import.meta.url);
const STORE_HOST = fileURLToPath(new URL("./workers/store_host.ts", import.meta.url));

function randomToken(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(24));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

/** Resident memory of `pid` in MiB. */
function rssMiB(pid: number): number {
  const status = Deno.readTextFileSync(`/proc/${pid}/status`);
  return Number(status.match(/^VmRSS:\s+(\d+) kB$/m)![1]) / 1024;
}

/** Whether `needle` occurs anywhere in `haystack`. */
function contains(haystack: Uint8Array, needle: Uint8Array): boolean {
  outer: for (let i = 0; i + needle.length <= haystack.length; i++) {
    for (let j = 0; j < needle.length; j++) if (haystack[i + j] !== needle[j]) continue outer;
    return true;
  }
  return false;
}

function concat(chunks: Uint8Array[]): Uint8Array {
  const out = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0));
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.length;
  }
  return out;
}

const CROWDS: { what: string; limit: number; env: Record<string, string> }[] = [
  { what: "a store limited to 1024 files", limit: 1024, env: {} },
  {
    what: "a store limited to 256 files without a handshake cap",
    limit: 256,
    env: { MAX_PENDING: "100000", HANDSHAKE_MS: "1000" },
  },
];

for (const { what, limit, env } of CROWDS) {
  Deno.test(`1,100 idle connections to ${what} leave a running 2-rank job finishing normally`, async () => {
    const port = freePort();
    const token = randomToken();
    const goDir = await Deno.makeTempDir({ prefix: "dtrain_crowd_" });
    const host = new Deno.Command("bash", {
      args: ["-c", `ulimit -n ${limit} && exec "$0" run -A "$1"`, Deno.execPath(), STORE_HOST],
      env: { PORT: String(port), TOKEN: token, NO_COLOR: "1", ...env },
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    let listening!: () => void;
    const ready = new Promise<void>((r) => (listening = r));
    const out = collectLines(host.stdout, (line) => line === "listening" && listening());
    const err = collectLines(host.stderr, () => {});
    const idle: Deno.Conn[] = [];
    try {
      await within(ready, 10_000, "the store host starting");
      let joined = 0, bothJoined!: () => void;
      const both = new Promise<void>((r) => (bothJoined = r));
      const job = runRanks({
        worker: FAULTS,
        worldSize: 2,
        timeoutMs: 60_000,
        port,
        token,
        env: {
          MODE: "hold",
          DTRAIN_STORE_HOSTED: "1",
          GO_FILE: `${goDir}/go`,
          TEST_TIMEOUT_MS: "30000",
        },
        onLine: (_, line) => line === "joined" && ++joined === 2 && bothJoined(),
      });
      await within(Promise.race([both, job]), 30_000, "both ranks joining");
      const before = rssMiB(host.pid);
      for (let batch = 0; batch < 11; batch++) {
        const opened = await Promise.allSettled(
          Array.from({ length: 100 }, () => Deno.connect({ hostname: "127.0.0.1", port })),
        );
        for (const o of opened) if (o.status === "fulfilled") idle.push(o.value);
      }
      const grown = rssMiB(host.pid) - before;
      // The ranks now open new store connections (a subgroup) through the crowd, and finish.
      await Deno.writeTextFile(`${goDir}/go`, "");
      const runs = await job;
      assertAllOk(runs);
      for (const r of runs) assert.equal(r.result?.sum, 2, `rank ${r.rank}`);
      assert.ok(idle.length > 1000, `only ${idle.length} of 1,100 connections opened`);
      assert.ok(grown < 32, `the store's resident memory grew by ${grown.toFixed(1)} MiB`);
      await host.stdin.close();
      const status = await within(host.status, 10_000, "the store host stopping");
      assert.equal(status.code, 0, await err);
      const stats = JSON.parse((await out).trim().split("\n").at(-1)!);
      assert.ok(stats.shed > 0, `no connection was shed: ${JSON.stringify(stats)}`);
    } finally {
      for (const c of idle) c.close();
      try {
        host.kill("SIGKILL");
      } catch {
        // exited
      }
      await host.status;
      await Promise.allSettled([out, err, host.stdin.close()]);
      await Deno.remove(goDir, { recursive: true });
    }
  });
}

Deno.test("a store host raises its soft limit of open files to the hard limit", async () => {
  const port = freePort();
  const host = new Deno.Command("bash", {
    args: ["-c", `ulimit -S -n 256 && exec "$0" run -A "$1"`, Deno.execPath(), STORE_HOST],
    env: { PORT: String(port), TOKEN: "t", NO_COLOR: "1" },
    stdin: "piped",
    stdout: "piped",
    stderr: "null",
  }).spawn();
  let listening!: () => void;
  const ready = new Promise<void>((r) => (listening = r));
  const out = collectLines(host.stdout, (line) => line === "listening" && listening());
  try {
    await within(ready, 10_000, "the store host starting");
    const limits = Deno.readTextFileSync(`/proc/${host.pid}/limits`);
    const [soft, hard] = limits.match(/^Max open files\s+(\d+)\s+(\d+)/m)!.slice(1).map(Number);
    assert.ok(hard > 256, `the hard limit here is ${hard}: nothing to raise`);
    assert.equal(soft, hard, "soft limit of the store host");
  } finally {
    await host.stdin.close();
    await within(host.status, 10_000, "the store host stopping");
    await out;
  }
});

Deno.test("a proxy between the ranks and the store sees no byte of the token", async () => {
  const token = randomToken();
  await using server = StoreServer.listen({ hostname: "127.0.0.1", port: 0, token });
  const proxy = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const seen: Uint8Array[] = [];
  const copy = async (from: Deno.Conn, to: Deno.Conn) => {
    const buf = new Uint8Array(64 * 1024);
    try {
      for (let n; (n = await from.read(buf)) !== null;) {
        seen.push(buf.slice(0, n));
        await to.write(buf.subarray(0, n));
      }
    } catch {
      // either side closed
    }
    try {
      to.close();
    } catch {
      // already closed
    }
  };
  const relays: Promise<unknown>[] = [];
  const relaying = (async () => {
    for await (const client of proxy) {
      const upstream = await Deno.connect({ hostname: "127.0.0.1", port: server.port });
      relays.push(Promise.all([copy(client, upstream), copy(upstream, client)]));
    }
  })();
  try {
    const runs = await runRanks({
      worker: FAULTS,
      worldSize: 2,
      timeoutMs: 30_000,
      port: proxy.addr.port,
      token,
      env: { MODE: "job", DTRAIN_STORE_HOSTED: "1", TEST_TIMEOUT_MS: "10000" },
    });
    assertAllOk(runs);
  } finally {
    proxy.close();
    await relaying.catch(() => {});
    await Promise.all(relays);
  }
  const wire = concat(seen);
  assert.ok(wire.length > 200, `the proxy relayed only ${wire.length} bytes`);
  const tokenBytes = new TextEncoder().encode(token);
  assert.equal(contains(wire, tokenBytes), false, "the token crossed the wire");
  assert.equal(contains(wire, tokenBytes.subarray(0, 8)), false, "part of the token crossed");
});

Deno.test("a fake store on the master port receives no byte of the token and the rank refuses it", async () => {
  const token = randomToken();
  const fake = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const received: Uint8Array[] = [];
  const serving = (async () => {
    for await (const conn of fake) {
      // Greets like a store with a challenge, accepts whatever proof comes, proves itself with
      // made-up bytes, and records everything it receives.
      const greeting = new Uint8Array(CHALLENGE_BYTES);
      greeting.set([0x44, 0x54, 0x53, 0x54, VERSION, 0]);
      greeting.set(crypto.getRandomValues(new Uint8Array(NONCE_BYTES)), 6);
      const verdict = new Uint8Array(1 + PROOF_BYTES);
      verdict[0] = 1;
      verdict.set(crypto.getRandomValues(new Uint8Array(PROOF_BYTES)), 1);
      const buf = new Uint8Array(4096);
      try {
        let got = 0;
        for (let n; (n = await conn.read(buf)) !== null;) {
          received.push(buf.slice(0, n));
          const before = got;
          got += n;
          if (before < HELLO_BYTES && got >= HELLO_BYTES) await conn.write(greeting);
          if (before < HELLO_BYTES + RESPONSE_BYTES && got >= HELLO_BYTES + RESPONSE_BYTES) {
            await conn.write(verdict);
          }
        }
      } catch {
        // the rank hung up
      }
      conn.close();
    }
  })();
  try {
    const runs = await runRanks({
      worker: FAULTS,
      worldSize: 1,
      timeoutMs: 30_000,
      port: fake.addr.port,
      token,
      env: { MODE: "job", DTRAIN_STORE_HOSTED: "1", TEST_TIMEOUT_MS: "5000" },
    });
    assert.equal(runs[0].code, 1, runs[0].stderr);
    assert.match(
      String(runs[0].result?.error),
      /refused the handshake \(wrong DTRAIN_TOKEN or protocol version\): it cannot prove that it knows this job's token/,
    );
  } finally {
    fake.close();
    await serving.catch(() => {});
  }
  const wire = concat(received);
  assert.equal(
    wire.length,
    HELLO_BYTES + RESPONSE_BYTES,
    "the rank sent its hello (magic, version, rank), nonce and proof once, and no retry",
  );
  assert.equal(contains(wire, new TextEncoder().encode(token).subarray(0, 4)), false);
});
