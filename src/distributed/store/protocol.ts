/**
 * Codes, limits and byte codecs of the store's wire protocol, shared by the server and the
 * TypeScript client (the native client in csrc/gloo/store.cc mirrors them). The protocol
 * itself is documented in `server.ts`.
 * @module
 */

/** "DTST": the first four bytes of every handshake, both ways. */
export const MAGIC = new Uint8Array([0x44, 0x54, 0x53, 0x54]);
/** The protocol version this code speaks. */
export const VERSION = 3;

/** Request opcodes. */
export const Op = {
  set: 1,
  get: 2,
  wait: 3,
  add: 4,
  compareSet: 5,
  delete: 6,
  numKeys: 7,
  connectedRanks: 8,
} as const;

/** Response status bytes. */
export const Status = { ok: 0, timeout: 1, error: 2 } as const;

/** Longest key, in UTF-8 bytes. */
export const MAX_KEY_BYTES = 4096;
/** Most keys in one wait request. */
export const MAX_WAIT_KEYS = 1024;
/** Default bound on one value, in bytes (the server can be given another). */
export const DEFAULT_MAX_VALUE_BYTES = 16 * 1024 * 1024;
/** Longest wait, in ms (about 24.8 days): a longer `setTimeout` delay fires at once. */
export const MAX_TIMEOUT_MS = 2 ** 31 - 1;

const encoder = new TextEncoder();
const decoder = new TextDecoder("utf-8", { fatal: true });

/** The bytes of `s` as UTF-8. */
export function utf8(s: string): Uint8Array {
  return encoder.encode(s);
}

/** The UTF-8 text in `bytes`; throws on invalid UTF-8. */
export function text(bytes: Uint8Array): string {
  return decoder.decode(bytes);
}

/** Thrown when a peer sends bytes that are not the protocol; the connection is dropped. */
export class ProtocolError extends Error {
  override name = "ProtocolError";
}

/** Appends little-endian fields to a growing buffer. */
export class ByteWriter {
  #buf = new Uint8Array(64);
  #view = new DataView(this.#buf.buffer);
  #len = 0;

  /** Makes room for `n` more bytes (possibly replacing #buf and #view); returns their offset. */
  #reserve(n: number): number {
    if (this.#len + n > this.#buf.length) {
      const next = new Uint8Array(Math.max(this.#buf.length * 2, this.#len + n));
      next.set(this.#buf.subarray(0, this.#len));
      this.#buf = next;
      this.#view = new DataView(next.buffer);
    }
    const at = this.#len;
    this.#len += n;
    return at;
  }

  /** Appends one byte. */
  u8(v: number): this {
    const at = this.#reserve(1);
    this.#view.setUint8(at, v);
    return this;
  }

  /** Appends a 16-bit unsigned integer. */
  u16(v: number): this {
    const at = this.#reserve(2);
    this.#view.setUint16(at, v, true);
    return this;
  }

  /** Appends a 32-bit unsigned integer. */
  u32(v: number): this {
    const at = this.#reserve(4);
    this.#view.setUint32(at, v, true);
    return this;
  }

  /** Appends a 32-bit signed integer. */
  i32(v: number): this {
    const at = this.#reserve(4);
    this.#view.setInt32(at, v, true);
    return this;
  }

  /** Appends a 64-bit signed integer. */
  i64(v: bigint): this {
    const at = this.#reserve(8);
    this.#view.setBigInt64(at, v, true);
    return this;
  }

  /** Appends a 64-bit unsigned integer. */
  u64(v: bigint): this {
    const at = this.#reserve(8);
    this.#view.setBigUint64(at, v, true);
    return this;
  }

  /** Appends raw bytes. */
  raw(bytes: Uint8Array): this {
    const at = this.#reserve(bytes.length); // may replace #buf
    this.#buf.set(bytes, at);
    return this;
  }

  /** Appends a u32 length and the bytes. */
  bytes(bytes: Uint8Array): this {
    return this.u32(bytes.length).raw(bytes);
  }

  /** The bytes written so far. */
  done(): Uint8Array {
    return this.#buf.slice(0, this.#len);
  }

  /** The bytes written so far behind a u32 length: one frame. */
  frame(): Uint8Array {
    const body = this.done();
    return new ByteWriter().u32(body.length).raw(body).done();
  }
}

/** Reads little-endian fields from a byte array, throwing ProtocolError past its end. */
export class ByteReader {
  #bytes: Uint8Array;
  #view: DataView;
  #at = 0;

  /** @param bytes The bytes to read. */
  constructor(bytes: Uint8Array) {
    this.#bytes = bytes;
    this.#view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  #take(n: number): number {
    if (this.#at + n > this.#bytes.length) {
      throw new ProtocolError(`message ends at byte ${this.#bytes.length}, needed ${this.#at + n}`);
    }
    const at = this.#at;
    this.#at += n;
    return at;
  }

  /** Reads one byte. */
  u8(): number {
    return this.#view.getUint8(this.#take(1));
  }

  /** Reads a 32-bit unsigned integer. */
  u32(): number {
    return this.#view.getUint32(this.#take(4), true);
  }

  /** Reads a 32-bit signed integer. */
  i32(): number {
    return this.#view.getInt32(this.#take(4), true);
  }

  /** Reads a 64-bit signed integer. */
  i64(): bigint {
    return this.#view.getBigInt64(this.#take(8), true);
  }

  /** Reads a 64-bit unsigned integer. */
  u64(): bigint {
    return this.#view.getBigUint64(this.#take(8), true);
  }

  /** Reads a u32 length and that many bytes, refusing lengths over `max`. */
  bytes(max: number, what: string): Uint8Array {
    const n = this.u32();
    if (n > max) throw new ProtocolError(`${what} of ${n} bytes exceeds the limit of ${max}`);
    const at = this.#take(n);
    return this.#bytes.slice(at, at + n);
  }

  /** The bytes not read yet. */
  rest(): Uint8Array {
    return this.#bytes.subarray(this.#at);
  }

  /** Throws unless every byte was read. */
  end(): void {
    if (this.#at !== this.#bytes.length) {
      throw new ProtocolError(`${this.#bytes.length - this.#at} unexpected trailing bytes`);
    }
  }
}

/** Reads exact byte counts from a connection, buffering small reads. */
export class ConnReader {
  #conn: Deno.Conn;
  #scratch: Uint8Array;
  #left = new Uint8Array(0);

  /**
   * @param conn The connection to read from.
   * @param bufferBytes Size of the read buffer (default 64 KiB); see `enlarge`.
   */
  constructor(conn: Deno.Conn, bufferBytes = 64 * 1024) {
    this.#conn = conn;
    this.#scratch = new Uint8Array(bufferBytes);
  }

  /** Replaces the read buffer with one of `bufferBytes`, e.g. once a peer is trusted. */
  enlarge(bufferBytes: number): void {
    if (bufferBytes > this.#scratch.length) this.#scratch = new Uint8Array(bufferBytes);
  }

  /** The next `n` bytes, or null if the peer closed the connection first. */
  async exactly(n: number): Promise<Uint8Array | null> {
    const out = new Uint8Array(n);
    let filled = Math.min(n, this.#left.length);
    out.set(this.#left.subarray(0, filled));
    this.#left = this.#left.subarray(filled);
    while (filled < n) {
      if (n - filled >= this.#scratch.length) {
        // Large payloads go straight into place.
        const got = await this.#conn.read(out.subarray(filled));
        if (got === null) return null;
        filled += got;
        continue;
      }
      const got = await this.#conn.read(this.#scratch);
      if (got === null) return null;
      const take = Math.min(got, n - filled);
      out.set(this.#scratch.subarray(0, take), filled);
      filled += take;
      this.#left = this.#scratch.slice(take, got);
    }
    return out;
  }
}

/** Writes all of `bytes` to `conn`. */
export async function writeAll(conn: Deno.Conn, bytes: Uint8Array): Promise<void> {
  let off = 0;
  while (off < bytes.length) off += await conn.write(bytes.subarray(off));
}
