/**
 * The TypeScript client of the rendezvous store (protocol in `server.ts`). One connection,
 * requests answered in order.
 * @module
 */

import { DistError } from "../errors.ts";
import {
  CHALLENGE_BYTES,
  clientProof,
  hello,
  hmacKey,
  nonce,
  PROOF_BYTES,
  sameBytes,
  serverProof,
} from "./auth.ts";
import { checkToken, storeReach } from "./token.ts";
import {
  ByteReader,
  ByteWriter,
  ConnReader,
  MAGIC,
  MAX_TIMEOUT_MS,
  Op,
  Status,
  text,
  utf8,
  VERSION,
  writeAll,
} from "./protocol.ts";

/** How to reach a store. */
export interface StoreClientOptions {
  /** The store's host. */
  hostname: string;
  /** The store's port. */
  port: number;
  /** The job's shared secret: 1..1024 bytes, at least 32 unless `hostname` is loopback. */
  token: string;
  /** This process's rank, announced to the server for diagnostics; -1 if none. */
  rank?: number;
  /**
   * Bound on connecting (retried while the server is not up yet) and default for waits; at most
   * `MAX_TIMEOUT_MS`.
   */
  timeoutMs?: number;
}

/** Refuses a timeout the wire (u32) and the server's timers (2³¹−1 ms) cannot carry. */
function checkTimeout(what: string, timeoutMs: number): void {
  if (!(timeoutMs >= 0 && timeoutMs <= MAX_TIMEOUT_MS)) {
    throw new DistError(
      "invalid",
      `${what}: timeoutMs must be 0..${MAX_TIMEOUT_MS} (about 24.8 days), got ${timeoutMs}`,
    );
  }
}

/**
 * A connection to the store.
 *
 * @example Set and read a key
 * ```ts
 * import assert from "node:assert/strict";
 * import { StoreServer } from "./server.ts";
 * import { StoreClient } from "./client.ts";
 * const server = StoreServer.listen({ hostname: "127.0.0.1", port: 0, token: "t" });
 * const store = await StoreClient.connect({ hostname: "127.0.0.1", port: server.port, token: "t" });
 * await store.set("greeting", "hello");
 * assert.equal(new TextDecoder().decode(await store.get("greeting")), "hello");
 * store.close();
 * await server.close();
 * ```
 */
export class StoreClient {
  /** Default bound on waits, in milliseconds. */
  readonly timeoutMs: number;
  #conn: Deno.Conn;
  #reader: ConnReader;
  #where: string;
  #queue: Promise<unknown> = Promise.resolve();
  #closed = false;

  private constructor(conn: Deno.Conn, where: string, timeoutMs: number) {
    this.#conn = conn;
    this.#reader = new ConnReader(conn);
    this.#where = where;
    this.timeoutMs = timeoutMs;
  }

  /** This side's address of the connection: the local interface that routes to the store. */
  get localAddress(): string {
    return (this.#conn.localAddr as Deno.NetAddr).hostname;
  }

  /**
   * Connects and authenticates (see `auth.ts`), retrying while the server is not listening yet or
   * ends the connection before its verdict (a crowded store sheds the oldest handshake; a reset
   * under churn). Only a refusal is final: a store that is not a dtrain store or speaks another
   * version, rejects this client's proof, or cannot prove that it knows the token.
   *
   * @param options Address, token, rank and timeout (default 30 s).
   * @returns The connected client.
   * @throws DistError "timeout" if no store answers within the timeout, "store" if it refuses or
   *   cannot prove that it knows the token, "invalid" for a timeout out of range or a token that
   *   `checkToken` refuses (one shorter than 32 bytes for a store that is not on loopback).
   */
  static async connect(options: StoreClientOptions): Promise<StoreClient> {
    const timeoutMs = options.timeoutMs ?? 30_000;
    checkTimeout("store connect", timeoutMs);
    const where = `${options.hostname}:${options.port}`;
    checkToken(options.token, `store connect to ${where}`, storeReach(options.hostname));
    const deadline = Date.now() + timeoutMs;
    const key = await hmacKey(options.token);
    for (;;) {
      let conn: Deno.Conn;
      try {
        conn = await Deno.connect({ hostname: options.hostname, port: options.port });
      } catch (cause) {
        if (!(cause instanceof Deno.errors.ConnectionRefused) || Date.now() >= deadline) {
          const code = cause instanceof Deno.errors.ConnectionRefused ? "timeout" : "store";
          throw new DistError(
            code,
            `cannot connect to the store at ${where} within ${timeoutMs / 1000} s: ` +
              (cause as Error).message,
            { cause },
          );
        }
        await new Promise((r) => setTimeout(r, 50));
        continue;
      }
      const client = new StoreClient(conn, where, timeoutMs);
      let dropped: string | null;
      try {
        dropped = await client.#handshake(key, options.rank ?? -1);
      } catch (err) {
        client.close();
        throw err;
      }
      if (dropped === null) return client;
      client.close();
      if (Date.now() >= deadline) {
        throw new DistError(
          "timeout",
          `the store at ${where} ended every handshake for ${timeoutMs / 1000} s, the last one ` +
            `${dropped} (crowded by other connections?)`,
        );
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /**
   * Runs the client side of the handshake: this client proves first, then checks the store's
   * proof. Returns null once both hold, or where the store ended the connection before its
   * verdict (worth retrying); throws on a refusal.
   */
  async #handshake(key: CryptoKey, rank: number): Promise<string | null> {
    const refuse = (why: string) =>
      new DistError(
        "store",
        `the store at ${this.#where} refused the handshake (wrong DTRAIN_TOKEN or protocol ` +
          `version): ${why}`,
      );
    const read = (n: number) => this.#reader.exactly(n).catch(() => null);
    const send = (bytes: Uint8Array) => writeAll(this.#conn, bytes).then(() => true, () => false);
    if (!await send(hello(rank))) return "before its challenge";
    const head = await read(6);
    if (head === null) return "before its challenge";
    if (!MAGIC.every((b, i) => head[i] === b)) throw refuse("it does not greet as a dtrain store");
    const version = new DataView(head.buffer).getUint16(4, true);
    if (version !== VERSION) {
      throw refuse(`it speaks protocol version ${version}, this client ${VERSION}`);
    }
    const theirs = await read(CHALLENGE_BYTES - 6);
    if (theirs === null) return "during its challenge";
    const mine = nonce();
    const response = new ByteWriter().raw(mine).raw(await clientProof(key, theirs, mine, rank));
    if (!await send(response.done())) return "before its verdict";
    const verdict = await read(1);
    if (verdict === null) return "before its verdict";
    if (verdict[0] !== 1) throw refuse("it did not accept this client's proof");
    const proof = await read(PROOF_BYTES);
    if (proof === null) return "before its proof";
    if (!sameBytes(proof, await serverProof(key, mine, theirs))) {
      throw refuse("it cannot prove that it knows this job's token");
    }
    return null;
  }

  /** Stores `value` under `key`, waking whoever waits for it. */
  async set(key: string, value: Uint8Array | string): Promise<void> {
    const v = typeof value === "string" ? utf8(value) : value;
    await this.#request(`set of '${key}'`, 0, (w) => w.u8(Op.set).bytes(utf8(key)).bytes(v));
  }

  /** The value of `key`, waiting up to `timeoutMs` for it to be set. */
  async get(key: string, timeoutMs: number = this.timeoutMs): Promise<Uint8Array> {
    checkTimeout(`store get of '${key}'`, timeoutMs);
    const r = await this.#request(
      `get of '${key}'`,
      timeoutMs,
      (w) => w.u8(Op.get).bytes(utf8(key)).u32(timeoutMs),
    );
    return r.rest().slice();
  }

  /** Resolves once every key in `keys` is set; throws DistError "timeout" after `timeoutMs`. */
  async wait(keys: string[], timeoutMs: number = this.timeoutMs): Promise<void> {
    checkTimeout(`store wait for '${keys.join("', '")}'`, timeoutMs);
    await this.#request(`wait for '${keys.join("', '")}'`, timeoutMs, (w) => {
      w.u8(Op.wait).u32(keys.length);
      for (const k of keys) w.bytes(utf8(k));
      w.u32(timeoutMs);
    });
  }

  /** Adds `delta` to the integer under `key` (missing counts as 0); returns the sum. */
  async add(key: string, delta: number): Promise<number> {
    const r = await this.#request(
      `add to '${key}'`,
      0,
      (w) => w.u8(Op.add).bytes(utf8(key)).i64(BigInt(delta)),
    );
    return Number(r.i64());
  }

  /**
   * Sets `key` to `desired` if it holds `expected` (or is missing and `expected` is empty).
   * @returns The value stored afterwards (empty if the key is missing).
   */
  async compareSet(
    key: string,
    expected: Uint8Array | string,
    desired: Uint8Array | string,
  ): Promise<Uint8Array> {
    const e = typeof expected === "string" ? utf8(expected) : expected;
    const d = typeof desired === "string" ? utf8(desired) : desired;
    const r = await this.#request(
      `compareSet of '${key}'`,
      0,
      (w) => w.u8(Op.compareSet).bytes(utf8(key)).bytes(e).bytes(d),
    );
    return r.rest().slice();
  }

  /** Deletes `key`; returns whether it existed. */
  async delete(key: string): Promise<boolean> {
    const r = await this.#request(`delete of '${key}'`, 0, (w) => w.u8(Op.delete).bytes(utf8(key)));
    return r.u8() === 1;
  }

  /** How many keys the store holds. */
  async numKeys(): Promise<number> {
    const r = await this.#request("numKeys", 0, (w) => w.u8(Op.numKeys));
    return Number(r.u64());
  }

  /** Distinct ranks with an open connection to the store, sorted: who is still alive. */
  async connectedRanks(): Promise<number[]> {
    const r = await this.#request("connectedRanks", 0, (w) => w.u8(Op.connectedRanks));
    return Array.from({ length: r.u32() }, () => r.i32());
  }

  /** Lets the process exit while a request is waiting (a background watcher's connection). */
  unref(): void {
    this.#conn.unref();
  }

  /** Closes the connection. Idempotent. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    try {
      this.#conn.close();
    } catch {
      // the server closed it first
    }
  }

  /** Same as `close()`, for `using`. */
  [Symbol.dispose](): void {
    this.close();
  }

  #request(
    what: string,
    timeoutMs: number,
    build: (w: ByteWriter) => void,
  ): Promise<ByteReader> {
    const run = async () => {
      if (this.#closed) throw new DistError("store", `store ${what}: the client is closed`);
      const w = new ByteWriter();
      build(w);
      let body: Uint8Array | null = null;
      try {
        await writeAll(this.#conn, w.frame());
        const head = await this.#reader.exactly(4);
        if (head !== null) {
          body = await this.#reader.exactly(new DataView(head.buffer).getUint32(0, true));
        }
      } catch (cause) {
        throw new DistError("store", `store ${what} at ${this.#where} failed: ${cause}`, { cause });
      }
      if (body === null || body.length === 0) {
        throw new DistError("store", `store ${what}: ${this.#where} closed the connection`);
      }
      const r = new ByteReader(body);
      const status = r.u8();
      if (status === Status.timeout) {
        throw new DistError("timeout", `store ${what} timed out after ${timeoutMs / 1000} s`);
      }
      if (status !== Status.ok) {
        throw new DistError("store", `store ${what} failed: ${text(r.rest())}`);
      }
      return r;
    };
    const p = this.#queue.then(run, run);
    this.#queue = p.catch(() => {});
    return p;
  }
}
