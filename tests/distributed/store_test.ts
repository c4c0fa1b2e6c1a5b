// The rendezvous store: its API, its limits, and that hostile connections are dropped
// without disturbing a real job on the same store.
import assert from "node:assert/strict";
import { DistError } from "../../src/distributed/errors.ts";
import { StoreClient } from "../../src/distributed/store/client.ts";
import { StoreServer } from "../../src/distributed/store/server.ts";
import {
  CHALLENGE_BYTES,
  clientProof,
  hello,
  hmacKey,
  nonce,
  PROOF_BYTES,
  serverProof,
} from "../../src/distributed/store/auth.ts";
import { writeAll } from "../../src/distributed/store/protocol.ts";
import { assertAllOk, freePort, runRanks } from "../_harness/ranks.ts";
import { within } from "../_harness/within.ts";

const TOKEN = "store-test-token";
const text = (b: Uint8Array) => new TextDecoder().decode(b);

function serve(options: { maxValueBytes?: number; handshakeTimeoutMs?: number } = {}) {
  return StoreServer.listen({ hostname: "127.0.0.1", port: 0, token: TOKEN, ...options });
}

function connect(server: StoreServer, token = TOKEN, rank?: number) {
  return StoreClient.connect({
    hostname: "127.0.0.1",
    port: server.port,
    token,
    rank,
    timeoutMs: 2000,
  });
}

/**
 * Resolves once the server has closed `conn` (EOF or a reset); fails if the server sends data
 * instead, or keeps the connection open past `ms`.
 */
async function closedByServer(conn: Deno.Conn, what: string, ms = 5000): Promise<void> {
  const drain = async (): Promise<void> => {
    const buf = new Uint8Array(64);
    for (;;) {
      let n: number | null;
      try {
        n = await conn.read(buf);
      } catch (err) {
        if (err instanceof Deno.errors.ConnectionReset) return;
        throw err;
      }
      if (n === null) return;
    }
  };
  try {
    await within(drain(), ms, `${what}: the server did not close the connection`);
  } finally {
    conn.close();
  }
}

/** A test whose whole body is raced against a deadline, so a stuck server fails it. */
function storeTest(name: string, body: () => Promise<void> | void, ms = 30_000): void {
  Deno.test(name, () => within(Promise.resolve().then(body), ms, name));
}

async function until(condition: () => boolean | Promise<boolean>, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`condition not met within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** Reads exactly `n` bytes from `conn` within 5 s. */
async function readExactly(conn: Deno.Conn, n: number, what: string): Promise<Uint8Array> {
  const out = new Uint8Array(n);
  for (let filled = 0; filled < n;) {
    const got = await within(conn.read(out.subarray(filled)), 5000, what);
    if (got === null) throw new Error(`${what}: the server closed the connection`);
    filled += got;
  }
  return out;
}

/** Runs the client side of the handshake on a raw connection (to send hand-made frames after). */
async function authenticate(conn: Deno.Conn, token = TOKEN): Promise<void> {
  const key = await hmacKey(token);
  await writeAll(conn, hello(-1));
  const theirs = (await readExactly(conn, CHALLENGE_BYTES, "challenge")).subarray(6);
  const mine = nonce();
  const proof = await clientProof(key, theirs, mine, -1);
  await writeAll(conn, new Uint8Array([...mine, ...proof]));
  const verdict = await readExactly(conn, 1 + PROOF_BYTES, "verdict");
  assert.equal(verdict[0], 1, "the store accepts the proof");
  assert.deepEqual(verdict.subarray(1), await serverProof(key, mine, theirs));
}

storeTest(
  "store: set, get, wait, add, compareSet, delete, numKeys and connectedRanks",
  async () => {
    await using server = serve();
    using a = await connect(server, TOKEN, 0);
    using b = await connect(server, TOKEN, 1);
    const pending = a.get("late");
    await b.set("late", "value");
    assert.equal(text(await pending), "value");
    await a.wait(["late"]);
    assert.equal(await a.add("n", 5), 5);
    assert.equal(await b.add("n", -2), 3);
    assert.equal(text(await a.compareSet("c", "", "first")), "first");
    assert.equal(text(await a.compareSet("c", "wrong", "second")), "first");
    assert.equal(text(await a.compareSet("c", "first", "second")), "second");
    assert.equal(await a.numKeys(), 3);
    assert.equal(await a.delete("c"), true);
    assert.equal(await a.delete("c"), false);
    assert.deepEqual(await a.connectedRanks(), [0, 1]);
    await assert.rejects(a.add("late", 1), /add: value of key 'late' is not a decimal integer/);
    await assert.rejects(
      a.wait(["never"], 100),
      (e) =>
        e instanceof DistError && e.code === "timeout" &&
        /wait for 'never' timed out/.test(e.message),
    );
    b.close();
    await until(async () => (await a.connectedRanks()).length === 1);
    assert.deepEqual(await a.connectedRanks(), [0]);
  },
);

storeTest(
  "store: add on a value that is not UTF-8 answers an error and the connection stays usable",
  async () => {
    await using server = serve();
    using a = await connect(server);
    await a.set("bin", new Uint8Array([0x31, 0xff, 0xfe]));
    await assert.rejects(
      a.add("bin", 1),
      (e) =>
        e instanceof DistError && e.code === "store" &&
        e.message ===
          "store add to 'bin' failed: add: value of key 'bin' is not a decimal integer: " +
            "'1\ufffd\ufffd'",
    );
    assert.equal(await a.add("n", 2), 2);
    assert.equal(server.rejected, 0);
  },
);

storeTest(
  "store: a get with a timeout over 2³¹−1 ms waits (clamped), and the client refuses one",
  async () => {
    await using server = serve();
    using setter = await connect(server);
    // What the native client sends for a long timeout: u32 0xffffffff.
    const raw = await Deno.connect({ hostname: "127.0.0.1", port: server.port });
    try {
      await authenticate(raw);
      const frame = new Uint8Array(4 + 1 + 4 + 1 + 4);
      const v = new DataView(frame.buffer);
      v.setUint32(0, frame.length - 4, true);
      v.setUint8(4, 2); // get
      v.setUint32(5, 1, true);
      frame[9] = 0x6b; // key "k"
      v.setUint32(10, 0xffffffff, true);
      await raw.write(frame);
      await until(() => server.waiting === 1); // the get waits before the set arrives
      await setter.set("k", "v");
      const answer = new Uint8Array(6);
      assert.equal(await within(raw.read(answer), 5000, "answer to the get"), 6);
      assert.deepEqual(
        [...answer.subarray(4)],
        [0, 0x76],
        "status ok and the value, not a timeout",
      );
    } finally {
      raw.close();
    }
    const tooLong = (e: unknown) =>
      e instanceof DistError && e.code === "invalid" &&
      /timeoutMs must be 0\.\.2147483647 \(about 24\.8 days\), got 2147483648$/.test(e.message);
    await assert.rejects(setter.get("k", 2 ** 31), tooLong);
    await assert.rejects(setter.wait(["k"], 2 ** 31), tooLong);
    await assert.rejects(
      StoreClient.connect({
        hostname: "127.0.0.1",
        port: server.port,
        token: TOKEN,
        timeoutMs: 2 ** 31,
      }),
      tooLong,
    );
    assert.equal(text(await setter.get("k", 2 ** 31 - 1)), "v");
  },
);

storeTest(
  "store: wrong token, garbage bytes and an oversized value are refused while a 2-rank job finishes",
  async () => {
    await using server = serve({ maxValueBytes: 1024 * 1024 });
    const job = runRanks({
      worker: new URL("./workers/faults.ts", import.meta.url),
      worldSize: 2,
      timeoutMs: 30_000,
      port: server.port,
      token: TOKEN,
      env: { MODE: "job", DTRAIN_STORE_HOSTED: "1", TEST_TIMEOUT_MS: "10000" },
    });
    // Attack once both ranks are connected, i.e. while the job runs.
    await until(() => server.connectedRanks().length === 2);

    await assert.rejects(
      connect(server, "not-the-token"),
      /refused the handshake \(wrong DTRAIN_TOKEN/,
    );

    const garbage = await Deno.connect({ hostname: "127.0.0.1", port: server.port });
    await garbage.write(new TextEncoder().encode("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
    await closedByServer(garbage, "garbage bytes");

    // A frame announcing a 100 MiB value is cut off after its length, before any payload.
    const big = await Deno.connect({ hostname: "127.0.0.1", port: server.port });
    await authenticate(big);
    const frame = new Uint8Array(4 + 1 + 4 + 1 + 4);
    const v = new DataView(frame.buffer);
    v.setUint32(0, 1 + 4 + 1 + 4 + 100 * 1024 * 1024, true);
    v.setUint8(4, 1); // set
    v.setUint32(5, 1, true);
    frame[9] = 0x6b; // key "k"
    v.setUint32(10, 100 * 1024 * 1024, true);
    await big.write(frame);
    await closedByServer(big, "a frame announcing a 100 MiB value");

    // A value over the limit inside a frame the server does read is refused too.
    using legit = await connect(server);
    await assert.rejects(
      legit.set("big", new Uint8Array(1024 * 1024 + 1)),
      /closed the connection|failed/,
    );

    const runs = await within(job, 40_000, "the 2-rank job beside the attacks");
    assertAllOk(runs);
    for (const r of runs) assert.equal(r.result?.sum, 2);
    assert.equal(server.rejected, 4);
    using after = await connect(server);
    await after.set("still", "works");
    assert.equal(text(await after.get("still")), "works");
  },
);

storeTest("store: a connection that never completes its handshake is dropped", async () => {
  await using server = serve({ handshakeTimeoutMs: 200 });
  const idle = await Deno.connect({ hostname: "127.0.0.1", port: server.port });
  await closedByServer(idle, "a connection silent past the 200 ms handshake deadline");
  assert.equal(server.rejected, 1);
});

storeTest("store: binds only the address it is given", async () => {
  await using server = serve();
  assert.equal(server.hostname, "127.0.0.1");
});

storeTest("store: a busy port gives an error naming the address", () => {
  const port = freePort();
  using busy = Deno.listen({ hostname: "127.0.0.1", port });
  assert.throws(
    () => StoreServer.listen({ hostname: "127.0.0.1", port, token: TOKEN }),
    (e) =>
      e instanceof DistError && e.code === "store" &&
      e.message === `cannot host the store on 127.0.0.1:${port}: ` +
          "address already in use (another job or store is on this port?)",
  );
  void busy;
});

storeTest("store: a client gives up connecting after its timeout, naming the address", async () => {
  const port = freePort();
  await assert.rejects(
    StoreClient.connect({ hostname: "127.0.0.1", port, token: TOKEN, timeoutMs: 300 }),
    new RegExp(`cannot connect to the store at 127.0.0.1:${port} within 0.3 s`),
  );
});
