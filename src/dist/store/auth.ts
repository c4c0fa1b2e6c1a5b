/**
 * Mutual authentication of a store connection by challenge and response: each side proves that
 * it knows the job token with an HMAC-SHA256 over both sides' fresh nonces, so neither the token
 * nor anything replayable crosses the wire, and a client checks the store's proof before it
 * sends its own (a fake store on the master address learns nothing). The byte layout is in
 * `server.ts`; the native client in csrc/gloo/store.cc computes the same proofs.
 * @module
 */

import { ByteWriter, MAGIC, utf8, VERSION } from "./protocol.ts";

/** Bytes of each side's nonce and of each proof. */
export const NONCE_BYTES = 32;
/** Bytes of the client's hello: magic, version, rank, nonce. */
export const HELLO_BYTES = 4 + 2 + 4 + NONCE_BYTES;
/** Bytes of the server's challenge: magic, version, nonce, proof. */
export const CHALLENGE_BYTES = 4 + 2 + NONCE_BYTES + NONCE_BYTES;

const SERVER_LABEL = utf8("dtrain store server proof");
const CLIENT_LABEL = utf8("dtrain store client proof");

/** The job token as an HMAC-SHA256 key. */
export function hmacKey(token: string): Promise<CryptoKey> {
  const raw = utf8(token) as Uint8Array<ArrayBuffer>;
  return crypto.subtle.importKey("raw", raw, { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
}

/** A fresh random nonce. */
export function nonce(): Uint8Array {
  return crypto.getRandomValues(new Uint8Array(NONCE_BYTES));
}

async function mac(key: CryptoKey, parts: Uint8Array[]): Promise<Uint8Array> {
  const w = new ByteWriter();
  for (const p of parts) w.raw(p);
  const bytes = w.done();
  return new Uint8Array(await crypto.subtle.sign("HMAC", key, bytes as Uint8Array<ArrayBuffer>));
}

/** The store's proof: HMAC(token, label | client nonce | server nonce). */
export function serverProof(
  key: CryptoKey,
  clientNonce: Uint8Array,
  serverNonce: Uint8Array,
): Promise<Uint8Array> {
  return mac(key, [SERVER_LABEL, clientNonce, serverNonce]);
}

/**
 * The client's proof: HMAC(token, label | server nonce | client nonce | rank), with a label of
 * its own so that a store's answer can never be replayed as a client's.
 */
export function clientProof(
  key: CryptoKey,
  serverNonce: Uint8Array,
  clientNonce: Uint8Array,
  rank: number,
): Promise<Uint8Array> {
  return mac(key, [CLIENT_LABEL, serverNonce, clientNonce, new ByteWriter().i32(rank).done()]);
}

/** The client's hello. */
export function hello(rank: number, clientNonce: Uint8Array): Uint8Array {
  return new ByteWriter().raw(MAGIC).u16(VERSION).i32(rank).raw(clientNonce).done();
}

/** Compares in time independent of where the bytes differ (proofs are secrets until checked). */
export function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a[i] ^ b[i];
  return diff === 0;
}
