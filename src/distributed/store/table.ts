/**
 * The store's keys and waits: executes the requests of authenticated connections (the opcodes in
 * the protocol note of `server.ts`). Knows nothing of sockets.
 * @module
 */

import {
  type ByteReader,
  ByteWriter,
  MAX_KEY_BYTES,
  MAX_TIMEOUT_MS,
  MAX_WAIT_KEYS,
  Op,
  ProtocolError,
  Status,
  text,
  utf8,
} from "./protocol.ts";
import { sameBytes } from "./auth.ts";

interface Waiter {
  keys: string[];
  resolve: (found: boolean) => void;
  timer: ReturnType<typeof setTimeout>;
}

/** The key-value table behind a store server. */
export class StoreTable {
  #data = new Map<string, Uint8Array>();
  #waiters = new Set<Waiter>();
  #maxValue: number;
  #connectedRanks: () => number[];
  #closed = false;

  /**
   * @param maxValue Largest accepted value in bytes.
   * @param connectedRanks Answers the connectedRanks request.
   */
  constructor(maxValue: number, connectedRanks: () => number[]) {
    this.#maxValue = maxValue;
    this.#connectedRanks = connectedRanks;
  }

  /** Requests waiting for keys now. */
  get waiting(): number {
    return this.#waiters.size;
  }

  /** Ends every pending wait (as a timeout) and refuses new ones. */
  close(): void {
    this.#closed = true;
    for (const w of [...this.#waiters]) this.#finish(w, false);
  }

  /** Runs one request; resolves to its response frame. @throws ProtocolError on a bad one. */
  async execute(r: ByteReader): Promise<Uint8Array> {
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
        // Another connection's delete can run between the wait's end and here: the key is
        // answered as missing, not with a crash that ends this connection.
        const value = this.#data.get(key);
        return value === undefined ? timeoutFrame() : ok.raw(value).frame();
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
        const ranks = this.#connectedRanks();
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
