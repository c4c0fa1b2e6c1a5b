// The store handshake against near misses and strangers: proofs and compare-and-swap values wrong
// in a single byte (first or last) are refused by the store, the TypeScript client and the native
// client (Gloo's rendezvous); a stranger gets nothing derived from the token; and legitimate
// clients get through a flood of strangers. Real store, real clients, 127.0.0.1 only.
import assert from "node:assert/strict";
import { DistError } from "../../src/distributed/errors.ts";
import { GlooBackend } from "../../src/distributed/gloo.ts";
import { StoreClient } from "../../src/distributed/store/client.ts";
import { StoreServer } from "../../src/distributed/store/server.ts";
import {
  CHALLENGE_BYTES,
  clientProof,
  hello,
  HELLO_BYTES,
  hmacKey,
  nonce,
  NONCE_BYTES,
  PROOF_BYTES,
  serverProof,
} from "../../src/distributed/store/auth.ts";
import { writeAll } from "../../src/distributed/store/protocol.ts";
import { within } from "../_harness/within.ts";

const TOKEN = "0123456789abcdef0123456789abcdef";
/** Where each proof lies in its direction's byte stream (see the protocol note in server.ts). */
const STORE_PROOF_AT = CHALLENGE_BYTES + 1;
const CLIENT_PROOF_AT = HELLO_BYTES + NONCE_BYTES;
const EDGES = [["first", 0], ["last", PROOF_BYTES - 1]] as const;
const text = (b: Uint8Array) => new TextDecoder().decode(b);

/** `token` with its character at `at` (negative: from the end) changed. */
function oneCharOff(token: string, at: number): string {
  const i = at < 0 ? token.length + at : at;
  return token.slice(0, i) + (token[i] === "x" ? "y" : "x") + token.slice(i + 1);
}

function closeQuietly(conn: Deno.Conn): void {
  try {
    conn.close();
  } catch {
    // already closed
  }
}

/** Everything `conn` receives until the peer closes it (within 5 s). */
async function readToEnd(conn: Deno.Conn, what: string): Promise<Uint8Array> {
  const chunks: number[] = [];
  const buf = new Uint8Array(256);
  const drain = async () => {
    try {
      for (let n; (n = await conn.read(buf)) !== null;) chunks.push(...buf.subarray(0, n));
    } catch (err) {
      if (!(err instanceof Deno.errors.ConnectionReset)) throw err;
    }
  };
  await within(drain(), 5000, `${what}: the store did not close the connection`);
  return new Uint8Array(chunks);
}

/**
 * A relay to the store that flips the lowest bit of the byte at offset `at` of one direction's
 * stream, as an attacker on the path would: the proof there is then wrong in that byte only.
 */
function tamperingProxy(storePort: number, direction: "toClient" | "toStore", at: number) {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const relays: Promise<unknown>[] = [];
  const open: Deno.Conn[] = [];
  let connections = 0;
  const copy = async (from: Deno.Conn, to: Deno.Conn, flip: number | null) => {
    const buf = new Uint8Array(64 * 1024);
    let offset = 0;
    try {
      for (let n; (n = await from.read(buf)) !== null;) {
        const chunk = buf.slice(0, n);
        if (flip !== null && flip >= offset && flip < offset + n) chunk[flip - offset] ^= 1;
        offset += n;
        await writeAll(to, chunk);
      }
    } catch {
      // either side closed
    }
    closeQuietly(to);
  };
  const accepting = (async () => {
    for await (const client of listener) {
      connections++;
      const store = await Deno.connect({ hostname: "127.0.0.1", port: storePort });
      open.push(client, store);
      relays.push(Promise.all([
        copy(client, store, direction === "toStore" ? at : null),
        copy(store, client, direction === "toClient" ? at : null),
      ]));
    }
  })();
  return {
    port: listener.addr.port,
    /** Connections relayed so far: 1 after a refusal means the client did not retry. */
    get connections() {
      return connections;
    },
    async [Symbol.asyncDispose]() {
      listener.close();
      open.forEach(closeQuietly); // also those of a client that got in, wrongly
      await accepting.catch(() => {});
      await Promise.all(relays);
    },
  };
}

function connectTs(port: number, token = TOKEN, timeoutMs = 5000): Promise<StoreClient> {
  return StoreClient.connect({ hostname: "127.0.0.1", port, token, timeoutMs });
}

/** A one-rank Gloo group: its rendezvous goes through the native store client. */
function connectNative(port: number, prefix: string, token = TOKEN, timeoutMs = 5000) {
  return GlooBackend.connect({
    rank: 0,
    size: 1,
    globalRanks: [0],
    storeHost: "127.0.0.1",
    storePort: port,
    token,
    prefix,
    host: "127.0.0.1",
    iface: "",
    timeoutMs,
  });
}

/** Asserts that `connecting` fails as a refusal for `why`; a client that got in is closed. */
async function assertRefused(connecting: Promise<{ close(): void }>, why: RegExp, what = "") {
  const outcome = await within(
    connecting.then((client) => client.close(), (err: unknown) => err ?? "no error"),
    20_000,
    `the refusal ${what}`,
  );
  assert.ok(outcome !== undefined, `the store accepted the connection ${what}`);
  assert.ok(
    outcome instanceof DistError && outcome.code === "store" &&
      /refused the handshake \(wrong DTRAIN_TOKEN or protocol version\)/.test(outcome.message) &&
      why.test(outcome.message),
    `${what}: ${outcome}`,
  );
}
const STORE_UNPROVEN = /it cannot prove that it knows this job's token/;
const CLIENT_REFUSED = /it did not accept this client's proof/;

/** Sends the hello and returns the store's nonce. */
async function challenged(conn: Deno.Conn, rank: number): Promise<Uint8Array> {
  await writeAll(conn, hello(rank));
  const challenge = new Uint8Array(CHALLENGE_BYTES);
  for (let got = 0; got < CHALLENGE_BYTES;) {
    const n = await within(conn.read(challenge.subarray(got)), 5000, "the challenge");
    assert.ok(n !== null, "the store sent its challenge");
    got += n;
  }
  return challenge.subarray(6);
}

Deno.test("store: a client proof wrong in only its first or last byte is refused, the exact one accepted", async () => {
  await using server = StoreServer.listen({ hostname: "127.0.0.1", port: 0, token: TOKEN });
  const key = await hmacKey(TOKEN);
  for (const [what, flip] of [...EDGES, ["no", null] as const]) {
    const conn = await Deno.connect({ hostname: "127.0.0.1", port: server.port });
    try {
      const theirs = await challenged(conn, 7);
      const mine = nonce();
      const proof = await clientProof(key, theirs, mine, 7);
      if (flip !== null) proof[flip] ^= 0x80;
      await writeAll(conn, new Uint8Array([...mine, ...proof]));
      if (flip !== null) {
        assert.deepEqual([...await readToEnd(conn, `${what} byte wrong`)], [0], `${what} byte`);
        continue;
      }
      const verdict = new Uint8Array(1 + PROOF_BYTES);
      for (let got = 0; got < verdict.length;) {
        got += (await within(conn.read(verdict.subarray(got)), 5000, "the verdict"))!;
      }
      assert.equal(verdict[0], 1);
      assert.deepEqual(verdict.subarray(1), await serverProof(key, mine, theirs));
      assert.deepEqual(server.connectedRanks(), [7]);
    } finally {
      closeQuietly(conn);
    }
  }
  assert.equal(server.rejected, 2);
});

Deno.test("store: a recorded exchange replayed, or its store proof reflected as a client's, is refused", async () => {
  await using server = StoreServer.listen({ hostname: "127.0.0.1", port: 0, token: TOKEN });
  const key = await hmacKey(TOKEN);
  // What an observer records of one legitimate handshake.
  const first = await Deno.connect({ hostname: "127.0.0.1", port: server.port });
  const recordedNonce = await challenged(first, 3);
  const mine = nonce();
  const response = [...mine, ...await clientProof(key, recordedNonce, mine, 3)];
  await writeAll(first, new Uint8Array(response));
  const verdict = new Uint8Array(1 + PROOF_BYTES);
  for (let got = 0; got < verdict.length;) {
    got += (await within(first.read(verdict.subarray(got)), 5000, "the verdict"))!;
  }
  assert.equal(verdict[0], 1);
  first.close();
  const attempts: [string, (fresh: Uint8Array) => number[]][] = [
    ["the client's response replayed", () => response],
    ["the store's proof reflected", () => [...mine, ...verdict.subarray(1)]],
    ["the store's proof over the nonces swapped", (fresh) => [...fresh, ...verdict.subarray(1)]],
  ];
  for (const [what, forge] of attempts) {
    const conn = await Deno.connect({ hostname: "127.0.0.1", port: server.port });
    try {
      const fresh = await challenged(conn, 3);
      assert.notDeepEqual(fresh, recordedNonce, "a fresh nonce");
      await writeAll(conn, new Uint8Array(forge(fresh)));
      assert.deepEqual([...await readToEnd(conn, what)], [0], what);
    } finally {
      closeQuietly(conn);
    }
  }
  assert.equal(server.rejected, attempts.length);
});

Deno.test("store: a stranger gets a fresh nonce and a 0 verdict, nothing derived from the token", async () => {
  await using server = StoreServer.listen({ hostname: "127.0.0.1", port: 0, token: TOKEN });
  const challenges: Uint8Array[] = [];
  for (let i = 0; i < 2; i++) {
    const conn = await Deno.connect({ hostname: "127.0.0.1", port: server.port });
    try {
      await writeAll(conn, hello(-1));
      // Whatever the store says before the stranger proves anything: the challenge, then silence.
      const first = new Uint8Array(CHALLENGE_BYTES + 1);
      const got = await within(conn.read(first), 5000, "the challenge");
      assert.equal(got, CHALLENGE_BYTES, "the store sent its challenge and nothing else");
      challenges.push(first.slice(0, CHALLENGE_BYTES));
      await writeAll(conn, crypto.getRandomValues(new Uint8Array(NONCE_BYTES + PROOF_BYTES)));
      assert.deepEqual([...await readToEnd(conn, "a guessed proof")], [0]);
    } finally {
      closeQuietly(conn);
    }
  }
  assert.deepEqual([...challenges[0].subarray(0, 4)], [0x44, 0x54, 0x53, 0x54]);
  assert.notDeepEqual(challenges[0].subarray(6), challenges[1].subarray(6), "fresh nonces");
  assert.equal(server.rejected, 2);
});

Deno.test("store: compareSet with the expected value wrong in only its first or last byte does not swap", async () => {
  await using server = StoreServer.listen({ hostname: "127.0.0.1", port: 0, token: TOKEN });
  using store = await connectTs(server.port);
  await store.set("k", "abcdefgh");
  for (const expected of ["Xbcdefgh", "abcdefgX", "abcdefg", "abcdefghi", ""]) {
    assert.equal(text(await store.compareSet("k", expected, "swapped")), "abcdefgh", expected);
  }
  await store.set("bin", new Uint8Array([1, 2, 3]));
  for (const expected of [[0x81, 2, 3], [1, 2, 0x83]]) {
    const now = await store.compareSet("bin", new Uint8Array(expected), "swapped");
    assert.deepEqual([...now], [1, 2, 3], `expected ${expected}`);
  }
  assert.equal(text(await store.compareSet("k", "abcdefgh", "swapped")), "swapped");
});

for (const [what, flip] of EDGES) {
  Deno.test(`TypeScript client: a store proof wrong in its ${what} byte is refused, at once`, async () => {
    await using server = StoreServer.listen({ hostname: "127.0.0.1", port: 0, token: TOKEN });
    await using proxy = tamperingProxy(server.port, "toClient", STORE_PROOF_AT + flip);
    await assertRefused(connectTs(proxy.port), STORE_UNPROVEN);
    assert.equal(proxy.connections, 1, "a refusal is final: no retry");
  });

  Deno.test(`TypeScript client: its proof changed in the ${what} byte on the way is refused by the store`, async () => {
    await using server = StoreServer.listen({ hostname: "127.0.0.1", port: 0, token: TOKEN });
    await using proxy = tamperingProxy(server.port, "toStore", CLIENT_PROOF_AT + flip);
    await assertRefused(connectTs(proxy.port), CLIENT_REFUSED);
    assert.equal(proxy.connections, 1, "a refusal is final: no retry");
    assert.equal(server.rejected, 1);
  });

  Deno.test(`native client (Gloo rendezvous): a store proof wrong in its ${what} byte is refused, at once`, async () => {
    await using server = StoreServer.listen({ hostname: "127.0.0.1", port: 0, token: TOKEN });
    await using proxy = tamperingProxy(server.port, "toClient", STORE_PROOF_AT + flip);
    await assertRefused(connectNative(proxy.port, "tamper/"), STORE_UNPROVEN);
    assert.equal(proxy.connections, 1, "a refusal is final: no retry");
  });

  Deno.test(`native client (Gloo rendezvous): its proof changed in the ${what} byte on the way is refused by the store`, async () => {
    await using server = StoreServer.listen({ hostname: "127.0.0.1", port: 0, token: TOKEN });
    await using proxy = tamperingProxy(server.port, "toStore", CLIENT_PROOF_AT + flip);
    await assertRefused(connectNative(proxy.port, "tamper/"), CLIENT_REFUSED);
    assert.equal(proxy.connections, 1, "a refusal is final: no retry");
    assert.equal(server.rejected, 1);
  });
}

Deno.test("both clients: a token differing in its first or last character is refused; the exact one joins", async () => {
  await using server = StoreServer.listen({ hostname: "127.0.0.1", port: 0, token: TOKEN });
  for (const at of [0, -1]) {
    const near = oneCharOff(TOKEN, at);
    await assertRefused(connectTs(server.port, near), CLIENT_REFUSED, near);
    await assertRefused(connectNative(server.port, "near/", near), CLIENT_REFUSED);
  }
  assert.equal(server.rejected, 4);
  using ts = await connectTs(server.port);
  const gloo = await connectNative(server.port, "exact/");
  gloo.close();
  ts.close();
  assert.equal(server.rejected, 4);
});

Deno.test("a flood of strangers during their handshakes does not fail legitimate clients", async () => {
  // Few handshake slots, so that strangers shed legitimate handshakes at every stage.
  await using server = StoreServer.listen({
    hostname: "127.0.0.1",
    port: 0,
    token: TOKEN,
    maxPending: 2,
  });
  const port = server.port;
  let flooding = true;
  let strangers = 0;
  const stranger = async () => {
    while (flooding) {
      let conn: Deno.Conn;
      try {
        conn = await Deno.connect({ hostname: "127.0.0.1", port });
      } catch {
        continue; // the listen backlog overflowed: try again
      }
      strangers++;
      try {
        await writeAll(conn, hello(-1));
        await conn.read(new Uint8Array(CHALLENGE_BYTES));
        if (strangers % 2 === 0) await new Promise((r) => setTimeout(r, 2));
      } catch {
        // shed by the store
      }
      closeQuietly(conn);
    }
  };
  const flood = Array.from({ length: 16 }, stranger);
  const stop = setTimeout(() => (flooding = false), 2000);
  try {
    const started = Date.now();
    // Each legitimate client's error, or null once it got in (and closed again).
    const legit: Promise<unknown>[] = [];
    const join = (connecting: Promise<{ close(): void }>) =>
      legit.push(
        connecting.then((c) => c.close(), (err) => err ?? "no error").then((e) => e ?? null),
      );
    for (let wave = 0; Date.now() - started < 1500; wave++) {
      for (let i = 0; i < 4; i++) join(connectTs(port, TOKEN, 20_000));
      join(connectNative(port, `legit${wave}/`, TOKEN, 20_000));
      await new Promise((r) => setTimeout(r, 100));
    }
    const results = await within(Promise.all(legit), 30_000, "the legitimate clients");
    const failed = results.filter((e) => e !== null).map(String);
    assert.deepEqual(
      failed,
      [],
      `${failed.length} of ${results.length} legitimate clients failed:\n${failed.join("\n")}`,
    );
    assert.ok(results.length >= 20, `only ${results.length} legitimate clients ran`);
  } finally {
    flooding = false;
    clearTimeout(stop);
    await Promise.all(flood);
  }
  assert.ok(strangers > 200, `only ${strangers} stranger connections`);
  assert.ok(server.shed > 0, "no handshake was shed: the flood did not crowd the store");
});
