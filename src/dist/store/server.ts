/**
 * The rendezvous store server: a small key-value service that ranks use to find each other,
 * hosted by the launcher or by rank 0 on the address it is given.
 *
 * [Note: store wire protocol, version 1]
 * All integers are little-endian; `str` is a u32 byte length followed by the bytes.
 *
 *     handshake  client -> server  "DTST" u16 version u16 tokenLength token[tokenLength] i32 rank
 *                server -> client  "DTST" u16 version u8 accepted (1 = yes; on 0 the server closes)
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
 * magic or version, a wrong token, an oversized or malformed frame, or no handshake within
 * `handshakeTimeoutMs`) is closed and counted in `rejected`; other connections never notice.
 * Requests on one connection are answered in order, one at a time.
 * @module
 */

import { DistError } from "../errors.ts";
import {
  ByteReader,
  ByteWriter,
  ConnReader,
  DEFAULT_MAX_VALUE_BYTES,
  MAGIC,
  MAX_KEY_BYTES,
  MAX_TIMEOUT_MS,
  MAX_TOKEN_BYTES,
  MAX_WAIT_KEYS,
  Op,
  ProtocolError,
  Status,
  text,
  utf8,
  VERSION,
  writeAll,
} from "./protocol.ts";

/** How to start a store server. */
export interface StoreServerOptions {
  /** Address to bind, e.g. "127.0.0.1". Use "0.0.0.0" only to serve every interface. */
  hostname: string;
  /** Port to bind; 0 picks a free one (read it back from `port`). */
  port: number;
  /** The job's shared secret; every client must present it. */
  token: string;
  /** Largest accepted value in bytes. Default 16 MiB. */
  maxValueBytes?: number;
  /** A connection must finish its handshake within this time. Default 10 s. */
  handshakeTimeoutMs?: number;
}

interface Waiter {
  keys: string[];
  resolve: (found: boolean) => void;
  timer: ReturnType<typeof setTimeout>;
}

/**
 * A running store server.
 *
 * @example Host a store and stop it
 * ```ts
 * import { StoreServer } from "./server.ts";
 * const server = StoreServer.listen({ hostname: "127.0.0.1", port: 0, token: "secret" });
 * console.log(`store on ${server.hostname}:${server.port}`);
 * await server.close();
 * ```
 */
export class StoreServer {
  /** The bound address. */
  readonly hostname: string;
  /** The bound port. */
  readonly port: number;
  #listener: Deno.TcpListener;
  #token: Uint8Array;
  #maxValue: number;
  #maxFrame: number;
  #handshakeTimeoutMs: number;
  #data = new Map<string, Uint8Array>();
  #waiters = new Set<Waiter>();
  #conns = new Map<Deno.Conn, number>();
  #serving: Promise<void>;
  #rejected = 0;
  #closed = false;

  private constructor(listener: Deno.TcpListener, options: StoreServerOptions) {
    this.#listener = listener;
    this.hostname = listener.addr.hostname;
    this.port = listener.addr.port;
    this.#token = utf8(options.token);
    this.#maxValue = options.maxValueBytes ?? DEFAULT_MAX_VALUE_BYTES;
    this.#maxFrame = 1 + 3 * 4 + MAX_KEY_BYTES + 2 * this.#maxValue;
    this.#handshakeTimeoutMs = options.handshakeTimeoutMs ?? 10_000;
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
    if (utf8(options.token).length > MAX_TOKEN_BYTES) {
      throw new DistError("invalid", `store token is longer than ${MAX_TOKEN_BYTES} bytes`);
    }
    let listener: Deno.TcpListener;
    try {
      listener = Deno.listen({ hostname: options.hostname, port: options.port });
    } catch (cause) {
      const why = cause instanceof Deno.errors.AddrInUse
        ? "address already in use (another job or store is on this port?)"
        : (cause as Error).message;
      throw new DistError("store", `cannot host the store on ${where}: ${why}`, { cause });
    }
    return new StoreServer(listener, options);
  }

  /** Connections closed for a bad handshake, wrong token, garbage or oversized data. */
  get rejected(): number {
    return this.#rejected;
  }

  /** Requests waiting for keys now (get and wait). */
  get waiting(): number {
    return this.#waiters.size;
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
      for (const w of [...this.#waiters]) this.#finish(w, false);
    }
    await this.#serving;
  }

  /** Same as `close()`, for `await using`. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  async #acceptLoop(): Promise<void> {
    const serving = new Set<Promise<void>>();
    try {
      for await (const conn of this.#listener) {
        const p = this.#serve(conn).finally(() => serving.delete(p));
        serving.add(p);
      }
    } catch (err) {
      if (!this.#closed) throw err;
    }
    await Promise.all(serving);
  }

  async #serve(conn: Deno.Conn): Promise<void> {
    const reader = new ConnReader(conn);
    this.#conns.set(conn, -1);
    let handshakeTimedOut = false;
    const timer = setTimeout(() => {
      handshakeTimedOut = true;
      conn.close();
    }, this.#handshakeTimeoutMs);
    try {
      const rank = await this.#handshake(conn, reader);
      clearTimeout(timer);
      if (rank === null) return;
      this.#conns.set(conn, rank);
      for (;;) {
        const head = await reader.exactly(4);
        if (head === null) return;
        const len = new DataView(head.buffer).getUint32(0, true);
        if (len === 0 || len > this.#maxFrame) {
          throw new ProtocolError(`frame of ${len} bytes (limit ${this.#maxFrame})`);
        }
        const body = await reader.exactly(len);
        if (body === null) return;
        await writeAll(conn, await this.#execute(new ByteReader(body)));
      }
    } catch (err) {
      // Whatever one connection does, only that connection ends; the job's keep working.
      if (!this.#closed && (handshakeTimedOut || !isDisconnect(err))) this.#rejected++;
    } finally {
      clearTimeout(timer);
      this.#conns.delete(conn);
      try {
        conn.close();
      } catch {
        // already closed by close() or the handshake timer
      }
    }
  }

  /** The client's announced rank, or null after refusing it (the caller closes). */
  async #handshake(conn: Deno.Conn, reader: ConnReader): Promise<number | null> {
    const head = await reader.exactly(8);
    if (head === null) return null;
    const view = new DataView(head.buffer);
    if (!MAGIC.every((b, i) => head[i] === b)) throw new ProtocolError("bad magic");
    const version = view.getUint16(4, true);
    const tokenLen = view.getUint16(6, true);
    if (tokenLen > MAX_TOKEN_BYTES) throw new ProtocolError(`token of ${tokenLen} bytes`);
    const rest = await reader.exactly(tokenLen + 4);
    if (rest === null) return null;
    const ok = version === VERSION && sameBytes(rest.subarray(0, tokenLen), this.#token);
    await writeAll(conn, new ByteWriter().raw(MAGIC).u16(VERSION).u8(ok ? 1 : 0).done());
    if (!ok) {
      throw new ProtocolError(version === VERSION ? "wrong token" : `version ${version}`);
    }
    return new DataView(rest.buffer).getInt32(tokenLen, true);
  }

  async #execute(r: ByteReader): Promise<Uint8Array> {
    const ok = new ByteWriter().u8(Status.ok);
    const op = r.u8();
    switch (op) {
      case Op.set: {
        const key = this.#key(r);
        const value = r.bytes(this.#maxValue, "value");
        r.end();
        this.#put(key, value);
        return ok.frame();
      }
      case Op.get: {
        const key = this.#key(r);
        const timeoutMs = r.u32();
        r.end();
        if (!await this.#waitFor([key], timeoutMs)) return timeoutFrame();
        return ok.raw(this.#data.get(key)!).frame();
      }
      case Op.wait: {
        const n = r.u32();
        if (n > MAX_WAIT_KEYS) throw new ProtocolError(`wait for ${n} keys`);
        const keys = Array.from({ length: n }, () => this.#key(r));
        const timeoutMs = r.u32();
        r.end();
        return await this.#waitFor(keys, timeoutMs) ? ok.frame() : timeoutFrame();
      }
      case Op.add: {
        const key = this.#key(r);
        const delta = r.i64();
        r.end();
        const current = this.#data.get(key);
        // Decoded leniently: invalid UTF-8 becomes U+FFFD, which fails the test below.
        const now = current === undefined ? "0" : lenient.decode(current);
        if (!/^-?\d+$/.test(now)) {
          return errorFrame(
            `add: value of key '${key}' is not a decimal integer: '${now.slice(0, 40)}'`,
          );
        }
        const sum = BigInt.asIntN(64, BigInt(now) + delta);
        this.#put(key, utf8(sum.toString()));
        return ok.i64(sum).frame();
      }
      case Op.compareSet: {
        const key = this.#key(r);
        const expected = r.bytes(this.#maxValue, "expected value");
        const desired = r.bytes(this.#maxValue, "desired value");
        r.end();
        const current = this.#data.get(key);
        const swap = current === undefined ? expected.length === 0 : sameBytes(current, expected);
        if (swap) this.#put(key, desired);
        return ok.raw(this.#data.get(key) ?? new Uint8Array()).frame();
      }
      case Op.delete: {
        const key = this.#key(r);
        r.end();
        return ok.u8(this.#data.delete(key) ? 1 : 0).frame();
      }
      case Op.numKeys:
        r.end();
        return ok.u64(BigInt(this.#data.size)).frame();
      case Op.connectedRanks: {
        r.end();
        const ranks = this.connectedRanks();
        ok.u32(ranks.length);
        for (const rank of ranks) ok.i32(rank);
        return ok.frame();
      }
      default:
        throw new ProtocolError(`unknown opcode ${op}`);
    }
  }

  #key(r: ByteReader): string {
    try {
      return text(r.bytes(MAX_KEY_BYTES, "key"));
    } catch (err) {
      if (err instanceof ProtocolError) throw err;
      throw new ProtocolError("key is not valid UTF-8");
    }
  }

  #put(key: string, value: Uint8Array): void {
    this.#data.set(key, value);
    for (const w of [...this.#waiters]) {
      if (w.keys.every((k) => this.#data.has(k))) this.#finish(w, true);
    }
  }

  #waitFor(keys: string[], timeoutMs: number): Promise<boolean> {
    if (keys.every((k) => this.#data.has(k))) return Promise.resolve(true);
    if (timeoutMs === 0 || this.#closed) return Promise.resolve(false);
    return new Promise((resolve) => {
      const w: Waiter = {
        keys,
        resolve,
        timer: setTimeout(() => this.#finish(w, false), Math.min(timeoutMs, MAX_TIMEOUT_MS)),
      };
      this.#waiters.add(w);
    });
  }

  #finish(w: Waiter, found: boolean): void {
    clearTimeout(w.timer);
    this.#waiters.delete(w);
    w.resolve(found);
  }
}

const lenient = new TextDecoder();

function timeoutFrame(): Uint8Array {
  return new ByteWriter().u8(Status.timeout).frame();
}

function errorFrame(message: string): Uint8Array {
  return new ByteWriter().u8(Status.error).raw(utf8(message)).frame();
}

/** Compares in time independent of where the bytes differ (the token is a secret). */
function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a[i] ^ b[i];
  return diff === 0;
}

function isDisconnect(err: unknown): boolean {
  return err instanceof Deno.errors.ConnectionReset ||
    err instanceof Deno.errors.BrokenPipe ||
    err instanceof Deno.errors.BadResource ||
    err instanceof Deno.errors.Interrupted ||
    err instanceof Deno.errors.NotConnected;
}
