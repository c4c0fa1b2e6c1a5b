/**
 * A store host in its own process, for store_hardening_test.ts (which runs it under a low file
 * limit): serves env PORT with env TOKEN (and MAX_PENDING, HANDSHAKE_MS when set), prints
 * "listening", and on stdin's end prints its counters as JSON and exits 0.
 * @module
 */

import { StoreServer } from "../../../src/distributed/store/server.ts";
import { envInt } from "../../_harness/worker.ts";

const server = StoreServer.listen({
  hostname: "127.0.0.1",
  port: envInt("PORT", 0),
  token: Deno.env.get("TOKEN")!,
  maxPending: Deno.env.get("MAX_PENDING") ? envInt("MAX_PENDING", 64) : undefined,
  handshakeTimeoutMs: Deno.env.get("HANDSHAKE_MS") ? envInt("HANDSHAKE_MS", 0) : undefined,
});
console.log("listening");
for await (const _ of Deno.stdin.readable) {
  // Runs until the test closes stdin.
}
const { rejected, shed, acceptErrors } = server;
await server.close();
console.log(JSON.stringify({ rejected, shed, acceptErrors }));
