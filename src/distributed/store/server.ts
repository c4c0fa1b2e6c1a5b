/**
 * The rendezvous store server: a small key-value service that ranks use to find each other,
 * hosted by the launcher or by rank 0 on the address it is given.
 *
 * [Note: store wire protocol, version 3]
 * All integers are little-endian; `str` is a u32 byte length followed by the bytes.
 *
 *     handshake  client -> server  "DTST" u16 version i32 rank
 *                server -> client  "DTST" u16 version serverNonce[32]
 *                                  (to another version: "DTST" u16 its own version, then close)
 *                client -> server  clientNonce[32] clientProof[32]
 *                server -> client  u8 1 serverProof[32] if clientProof checks out, else u8 0
 *                                  and close
 *       clientProof = HMAC-SHA256(token, "dtrain store client proof" serverNonce clientNonce rank)
 *       serverProof = HMAC-SHA256(token, "dtrain store server proof" clientNonce serverNonce)
 *     (see `auth.ts`: the client proves first, so a stranger gets nothing derived from the token;
 *     the client then checks the store's proof. A client retries a connection that ends before
 *     the verdict, e.g. one shed for a newcomer; a 0 verdict or a wrong store proof is final.)
 *     request    u32 length, then `length` bytes: u8 opcode and its fields
 *       1 set         str key, str value                  -> ok
 *       2 get         str key, u32 timeoutMs              -> ok value | timeout   (waits for key)
 *       3 wait        u32 n, n x str key, u32 timeoutMs   -> ok | timeout
 *       4 add         str key, i64 delta                  -> ok i64 sum   (stored as decimal text)
 *       5 compareSet  str key, str expected, str desired  -> ok value now stored (empty if none);
 *                     sets desired if the value equals expected, or if the key is missing and
 *                     expected is empty
 *       6 delete      str key                             -> ok u8 existed
 *       7 numKeys                                         -> ok u64 count
 *       8 connectedRanks                                  -> ok u32 n, n x i32 rank
 *                     (distinct ranks announced by the handshakes of open connections; a rank
 *                     that vanishes from it has died or left)
 *     response   u32 length, then u8 status (0 ok, 1 timeout, 2 error + UTF-8 message) and result
 *
 * Keys are UTF-8 of at most 4 KiB, values at most `maxValueBytes` (16 MiB by default), a wait
 * names at most 1024 keys. A timeout of 0 checks once; longer than `MAX_TIMEOUT_MS` counts as
 * that (the native client clamps to the u32 range). A connection that sends anything else (bad
 * magic or version, a wrong proof, an oversized or malformed frame, or no handshake within
 * `handshakeTimeoutMs`) is closed and counted in `rejected`; other connections never notice.
 * Requests on one connection are answered in order, one at a time.
 *
 * [Note: a store no client can crash or starve]
 * The store serves the whole job, so no connection may take it down: accept errors (out of file
 * descriptors, a connection reset before it was accepted) back off and keep serving; at most
 * `maxPending` connections may be in their handshake, and a newcomer over that closes the oldest
 * at once (an idle crowd cannot lock clients out, and clients retry a connection closed before
 * the verdict); the open connections stay below the file limit (Deno itself cannot be trusted
 * to survive EMFILE: it has been seen to panic opening a descriptor of its own); a connection gets
 * only small buffers until it has authenticated; and the soft limit of open files is raised to
 * the hard one when the store starts.
 * @module
 */

import { DistError } from "../errors.ts";
import { raiseFileLimit } from "../lifetime.ts";
import { StoreTable } from "./table.ts";
import {
  challenge,
  clientProof,
  HELLO_BYTES,
  hmacKey,
  nonce,
  NONCE_BYTES,
  RESPONSE_BYTES,
  sameBytes,
  serverProof,
} from "./auth.ts";
import { checkToken, storeReach } from "./token.ts";
import {
  ByteReader,
  ByteWriter,
  ConnReader,
  DEFAULT_MAX_VALUE_BYTES,
  MAGIC,
  MAX_KEY_BYTES,
  ProtocolError,
  VERSION,
  writeAll,
} from "./protocol.ts";

/** How to start a store server. */
export interface StoreServerOptions {
  /** Address to bind, e.g. "127.0.0.1". Use "0.0.0.0" only to serve every interface. */
  hostname: string;
  /** Port to bind; 0 picks a free one (read it back from `port`). */
  port: number;
  /**
   * The job's shared secret; every client must prove that it knows it. 1..1024 bytes, and at
   * least 32 unless `hostname` is loopback (see `token.ts`).
   */
  token: string;
  /** Largest accepted value in bytes. Default 16 MiB. */
  maxValueBytes?: number;
  /** A connection must finish its handshake within this time. Default 10 s. */
  handshakeTimeoutMs?: number;
  /** Most connections in their handshake at once; a newcomer closes the oldest. Default 64. */
  maxPending?: number;
  /**
   * Most open connections; past it a newcomer closes the oldest in its handshake, or itself if
   * none is. Default: the soft limit of open files less 64 for the rest of the process.
   */
  maxConnections?: number;
}

/**
 * A running store server.
 *
 * @example Host a store and stop it
 * ```ts
 * import assert from "node:assert/strict";
 * import { StoreServer } from "./server.ts";
 * const server = StoreServer.listen({ hostname: "127.0.0.1", port: 0, token: "secret" });
 * assert.equal(server.hostname, "127.0.0.1");
 * assert.ok(server.port > 0); // port 0 asks the OS for a free one
 * await server.close();
 * ```
 */
export class StoreServer {
  /** The bound address. */
  readonly hostname: string;
  /** The bound port. */
  readonly port: number;
  #listener: Deno.TcpListener;
  #hmacKey: Promise<CryptoKey>;
  #maxFrame: number;
  #handshakeTimeoutMs: number;
  #table: StoreTable;
  #conns = new Map<Deno.Conn, number>();
  /** Connections in their handshake, oldest first (a Set keeps insertion order). */
  #pending = new Set<Deno.Conn>();
  #maxPending: number;
  #maxConnections: number;
  #serving: Promise<void>;
  #rejected = 0;
  #shed = 0;
  #acceptErrors = 0;
  #closed = false;

  private constructor(
    listener: Deno.TcpListener,
    options: StoreServerOptions,
    fileLimit: number | null,
  ) {
    this.#listener = listener;
    this.hostname = listener.addr.hostname;
    this.port = listener.addr.port;
    this.#hmacKey = hmacKey(options.token);
    const maxValue = options.maxValueBytes ?? DEFAULT_MAX_VALUE_BYTES;
    this.#maxFrame = 1 + 3 * 4 + MAX_KEY_BYTES + 2 * maxValue;
    this.#table = new StoreTable(maxValue, () => this.connectedRanks());
    this.#handshakeTimeoutMs = options.handshakeTimeoutMs ?? 10_000;
    this.#maxPending = options.maxPending ?? 64;
    this.#maxConnections = options.maxConnections ??
      (fileLimit === null ? Infinity : Math.max(fileLimit - 64, 16));
    this.#serving = this.#acceptLoop();
  }

  /**
   * Binds `hostname:port` and starts serving.
   *
   * @param options Address, token and limits.
   * @returns The running server.
   * @throws DistError (code "store") naming the address if it cannot be bound, e.g. busy.
   */
  static listen(options: StoreServerOptions): StoreServer {
    const where = `${options.hostname}:${options.port}`;
    checkToken(options.token, `store on ${where}`, storeReach(options.hostname));
    const fileLimit = raiseFileLimit();
    let listener: Deno.TcpListener;
    try {
      listener = Deno.listen({ hostname: options.hostname, port: options.port });
    } catch (cause) {
      const why = cause instanceof Deno.errors.AddrInUse
        ? "address already in use (another job or store is on this port?)"
        : (cause as Error).message;
      throw new DistError("store", `cannot host the store on ${where}: ${why}`, { cause });
    }
    return new StoreServer(listener, options, fileLimit);
  }

  /** Connections closed for a bad handshake, wrong token, garbage or oversized data. */
  get rejected(): number {
    return this.#rejected;
  }

  /** Connections closed unanswered because `maxPending` others were in their handshake. */
  get shed(): number {
    return this.#shed;
  }

  /** Failed accepts (e.g. out of file descriptors) that the server backed off from. */
  get acceptErrors(): number {
    return this.#acceptErrors;
  }

  /** Requests waiting for keys now (get and wait). */
  get waiting(): number {
    return this.#table.waiting;
  }

  /** Distinct ranks (as announced in their handshake) of the clients connected now, sorted. */
  connectedRanks(): number[] {
    return [...new Set(this.#conns.values())].filter((r) => r >= 0).sort((a, b) => a - b);
  }

  /** Stops listening, closes every connection and ends pending waits. Idempotent. */
  async close(): Promise<void> {
    if (!this.#closed) {
      this.#closed = true;
      this.#listener.close();
      for (const conn of this.#conns.keys()) conn.close();
      this.#table.close();
    }
    await this.#serving;
  }

  /** Same as `close()`, for `await using`. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  async #acceptLoop(): Promise<void> {
    const serving = new Set<Promise<void>>();
    let backoffMs = 0;
    while (!this.#closed) {
      let conn: Deno.Conn;
      try {
        conn = await this.#listener.accept();
        backoffMs = 0;
      } catch {
        if (this.#closed) break;
        // EMFILE, ENFILE, ECONNABORTED: the trouble passes (connections close, descriptors free
        // up); retry soon rather than spin or let it end the job.
        this.#acceptErrors++;
        backoffMs = Math.min(Math.max(2 * backoffMs, 10), 500);
        await new Promise((r) => setTimeout(r, backoffMs));
        continue;
      }
      if (this.#pending.size >= this.#maxPending || this.#conns.size >= this.#maxConnections) {
        // Shed the oldest handshake; with none, the newcomer (authenticated peers stay).
        const oldest = this.#pending.values().next().value ?? conn;
        this.#pending.delete(oldest);
        this.#shed++;
        closeQuietly(oldest);
        if (oldest === conn) continue;
      }
      const p = this.#serve(conn).finally(() => serving.delete(p));
      serving.add(p);
    }
    await Promise.all(serving);
  }

  async #serve(conn: Deno.Conn): Promise<void> {
    // Small reads until the peer has authenticated: an idle crowd costs little memory.
    const reader = new ConnReader(conn, RESPONSE_BYTES);
    this.#conns.set(conn, -1);
    this.#pending.add(conn);
    let handshakeTimedOut = false;
    const timer = setTimeout(() => {
      handshakeTimedOut = true;
      closeQuietly(conn);
    }, this.#handshakeTimeoutMs);
    let authenticated = false;
    let rejected = false;
    try {
      const accepted = await this.#handshake(conn, reader);
      clearTimeout(timer);
      if (accepted === null) return;
      // Trusted before the verdict goes out: a newcomer must not shed a client that has it (and
      // may already be sending requests).
      authenticated = true;
      this.#pending.delete(conn);
      this.#conns.set(conn, accepted.rank);
      reader.enlarge(64 * 1024);
      await writeAll(conn, accepted.verdict);
      for (;;) {
        const head = await reader.exactly(4);
        if (head === null) return;
        const len = new DataView(head.buffer).getUint32(0, true);
        if (len === 0 || len > this.#maxFrame) {
          throw new ProtocolError(`frame of ${len} bytes (limit ${this.#maxFrame})`);
        }
        const body = await reader.exactly(len);
        if (body === null) return;
        await writeAll(conn, await this.#table.execute(new ByteReader(body)));
      }
    } catch (err) {
      // Whatever one connection does, only that connection ends; the job's keep working.
      rejected = handshakeTimedOut || !isDisconnect(err);
    } finally {
      clearTimeout(timer);
      // A peer that walked away before authenticating (e.g. one that found our proof wrong)
      // failed its handshake too; one shed for a newcomer (no longer pending) counts in `shed`.
      if (!authenticated && this.#pending.has(conn)) rejected = true;
      if (rejected && !this.#closed) this.#rejected++;
      this.#pending.delete(conn);
      this.#conns.delete(conn);
      closeQuietly(conn);
    }
  }

  /**
   * Checks the peer's proof (see the protocol note); its announced rank and the verdict to send
   * it, or null on EOF.
   */
  async #handshake(
    conn: Deno.Conn,
    reader: ConnReader,
  ): Promise<{ rank: number; verdict: Uint8Array } | null> {
    // The magic alone first: anything else (an HTTP probe, say) is refused at once.
    const magic = await reader.exactly(MAGIC.length);
    if (magic === null) return null;
    if (!MAGIC.every((b, i) => magic[i] === b)) throw new ProtocolError("bad magic");
    const rest = await reader.exactly(HELLO_BYTES - MAGIC.length);
    if (rest === null) return null;
    const hello = new Uint8Array(HELLO_BYTES);
    hello.set(magic);
    hello.set(rest, MAGIC.length);
    const view = new DataView(hello.buffer);
    const version = view.getUint16(4, true);
    if (version !== VERSION) {
      await writeAll(conn, new ByteWriter().raw(MAGIC).u16(VERSION).done());
      throw new ProtocolError(`version ${version}`);
    }
    const rank = view.getInt32(6, true);
    const key = await this.#hmacKey;
    const serverNonce = nonce();
    await writeAll(conn, challenge(serverNonce));
    const answer = await reader.exactly(RESPONSE_BYTES);
    if (answer === null) return null;
    const clientNonce = answer.subarray(0, NONCE_BYTES);
    const proof = answer.subarray(NONCE_BYTES);
    if (!sameBytes(proof, await clientProof(key, serverNonce, clientNonce, rank))) {
      await writeAll(conn, new Uint8Array([0]));
      throw new ProtocolError("wrong proof of the token");
    }
    const verdict = new ByteWriter().u8(1).raw(await serverProof(key, clientNonce, serverNonce));
    return { rank, verdict: verdict.done() };
  }
}

function closeQuietly(conn: Deno.Conn): void {
  try {
    conn.close();
  } catch {
    // already closed
  }
}

function isDisconnect(err: unknown): boolean {
  return err instanceof Deno.errors.ConnectionReset ||
    err instanceof Deno.errors.BrokenPipe ||
    err instanceof Deno.errors.BadResource ||
    err instanceof Deno.errors.Interrupted ||
    err instanceof Deno.errors.NotConnected;
}
