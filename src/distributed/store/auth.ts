/**
 * Mutual authentication of a store connection by challenge and response, the client proving
 * first: the store sends a fresh nonce, the client answers with a fresh nonce of its own and an
 * HMAC-SHA256 of both under the job token, and only once that checks out does the store prove
 * itself with an HMAC under another label. A stranger who connects to the store therefore sees
 * nothing derived from the token (nothing to guess it against offline), the token never crosses
 * the wire, and a proof is useless on another connection (the other side's nonce is fresh) or in
 * the other direction (the labels differ). A client still checks the store's proof, so a fake
 * store cannot pass for the real one; what it gets, the client's proof over two nonces, resists
 * guessing only if the token is long and random, hence the rule in `token.ts`. The byte layout is
 * in `server.ts`; the native client in csrc/gloo/store.cc computes the same proofs.
 * @module
 */

import { ByteWriter, MAGIC, utf8, VERSION } from "./protocol.ts";

/** Bytes of each side's nonce. */
export const NONCE_BYTES = 32;
/** Bytes of each proof (an HMAC-SHA256). */
export const PROOF_BYTES = 32;
/** Bytes of the client's hello: magic, version, rank. */
export const HELLO_BYTES = 4 + 2 + 4;
/** Bytes of the server's challenge: magic, version, nonce. */
export const CHALLENGE_BYTES = 4 + 2 + NONCE_BYTES;
/** Bytes of the client's response: its nonce and its proof. */
export const RESPONSE_BYTES = NONCE_BYTES + PROOF_BYTES;

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

/**
 * The client's proof, sent first: HMAC(token, client label | server nonce | client nonce | rank),
 * which binds the rank the hello announced.
 */
export function clientProof(
  key: CryptoKey,
  serverNonce: Uint8Array,
  clientNonce: Uint8Array,
  rank: number,
): Promise<Uint8Array> {
  return mac(key, [CLIENT_LABEL, serverNonce, clientNonce, new ByteWriter().i32(rank).done()]);
}

/**
 * The store's proof, sent only to a client whose proof checked out: HMAC(token, server label |
 * client nonce | server nonce).
 */
export function serverProof(
  key: CryptoKey,
  clientNonce: Uint8Array,
  serverNonce: Uint8Array,
): Promise<Uint8Array> {
  return mac(key, [SERVER_LABEL, clientNonce, serverNonce]);
}

/** The client's hello. */
export function hello(rank: number): Uint8Array {
  return new ByteWriter().raw(MAGIC).u16(VERSION).i32(rank).done();
}

/** The server's challenge. */
export function challenge(serverNonce: Uint8Array): Uint8Array {
  return new ByteWriter().raw(MAGIC).u16(VERSION).raw(serverNonce).done();
}

/**
 * Compares in time independent of where the bytes differ (proofs are secrets until checked);
 * serves compare-and-swap too.
 */
export function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a[i] ^ b[i];
  return diff === 0;
}
