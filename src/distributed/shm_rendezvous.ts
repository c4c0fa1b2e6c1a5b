/**
 * How the ranks of one host open the shared-memory backend's segment together (shm.ts holds the
 * collectives on it): the process ids and rank 0's handle go through the store, the mapping
 * itself ends inside the segment ([Note: unnamed segments] in csrc/shm/segment.cc).
 * @module
 */

import { CollectiveStatus } from "../../ffi/collective_codes.ts";
import type { ShmSymbols } from "../../ffi/shm.ts";
import type { BackendInit } from "./backend.ts";
import { DistError } from "./errors.ts";
import { nativeError } from "./native_context.ts";
import type { StoreClient } from "./store/client.ts";

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** The context's last error (or the library's, with a null context) as a DistError. */
function lastError(lib: ShmSymbols, ctx: Deno.PointerValue, status: number): DistError {
  return nativeError("shm", lib.dt_shm_last_error, ctx, status);
}

/** Rank 0's handle of its new segment, for the others to open it. */
function handleOf(lib: ShmSymbols, ctx: Deno.PointerValue): string {
  const buf = new Uint8Array(1024);
  const len = lib.dt_shm_ctx_handle(ctx, buf, buf.length);
  if (len < 0 || len >= buf.length) {
    throw new DistError("internal", `dt_shm_ctx_handle returned ${len}`);
  }
  return decoder.decode(buf.subarray(0, len));
}

/**
 * Bytes each rank stages per phase: env DTRAIN_SHM_SLOT_MIB (default 4). Larger slots mean
 * fewer synchronisations per collective, which matters most when the ranks share busy cores;
 * the segment holds two slots per rank.
 */
function slotBytes(): number {
  const mib = Number(Deno.env.get("DTRAIN_SHM_SLOT_MIB") ?? 4);
  if (!(mib > 0 && mib <= 1024)) {
    throw new DistError("invalid", `DTRAIN_SHM_SLOT_MIB must be in (0, 1024], got ${mib}`);
  }
  return Math.ceil(mib * 2 ** 20 / 4096) * 4096;
}

/**
 * The shared-memory rendezvous of one host-local group: group rank 0 creates the segment once
 * every member's process id is known and publishes its handle (the descriptor to open, never a
 * name), the others map it, and all wait until everyone has (then rank 0 closes its descriptor).
 *
 * @param lib The shared-memory library.
 * @param init Rank, size, job ranks, key prefix and timeout of the host-local group.
 * @param store A connected store client, used for the rendezvous only.
 * @returns The mapped context (the caller owns it: `dt_shm_ctx_free`).
 * @throws DistError naming what failed (a member that never arrived, the segment).
 */
export async function openGroupSegment(
  lib: ShmSymbols,
  init: BackendInit,
  store: StoreClient,
): Promise<Deno.PointerValue> {
  const { rank, size, prefix, timeoutMs } = init;
  const key = (k: string) => `${prefix}shm/${k}`;
  const who = `rank ${init.globalRanks[rank]} (group of ${size})`;
  const fail = (err: unknown): never => {
    const message = err instanceof Error ? err.message : String(err);
    throw new DistError(
      err instanceof DistError ? err.code : "internal",
      `shared-memory rendezvous of ${who}: ${message}`,
      { cause: err },
    );
  };
  await store.set(key(`pid/${rank}`), String(Deno.pid)).catch(fail);
  const pidKeys = init.globalRanks.map((_, r) => key(`pid/${r}`));
  await store.wait(pidKeys, timeoutMs).catch(fail);
  const pids = new Int32Array(size);
  for (let r = 0; r < size; r++) pids[r] = Number(decoder.decode(await store.get(pidKeys[r])));
  if (rank !== 0) await store.wait([key("handle")], timeoutMs).catch(fail);
  // Rank 0's label only names the segment in messages; the others get its handle, or the
  // reason it could not create the segment ("!" first), so that they fail with it at once.
  const name = rank === 0
    ? `/dtrain-${Deno.pid}-${crypto.randomUUID().slice(0, 8)}`
    : decoder.decode(await store.get(key("handle")));
  if (name.startsWith("!")) {
    fail(new DistError("internal", `rank ${init.globalRanks[0]} failed: ${name.slice(1)}`));
  }
  const out = new BigUint64Array(1);
  const created = lib.dt_shm_ctx_new(out);
  if (created !== CollectiveStatus.OK) throw lastError(lib, null, created);
  const ctx = Deno.UnsafePointer.create(out[0]);
  try {
    const status = lib.dt_shm_ctx_open(
      ctx,
      encoder.encode(`${name}\0`),
      rank === 0 ? 1 : 0,
      rank,
      size,
      new Int32Array(init.globalRanks),
      pids,
      slotBytes(),
      timeoutMs,
    );
    if (status !== CollectiveStatus.OK) {
      const err = lastError(lib, ctx, status);
      // Best effort: should the store be gone too, the others' wait names that instead.
      if (rank === 0) await store.set(key("handle"), `!${err.message}`).catch(() => {});
      fail(err);
    }
    if (rank === 0) await store.set(key("handle"), handleOf(lib, ctx));
    // The last step in shared memory, not the store: a rank that returns knows its peers
    // made their last store request (the handle) already, so a blocking collective on its
    // JavaScript thread, which may serve the store, cannot stall them (dtrain_shm.h).
    const mapped = await lib.dt_shm_ctx_wait_mapped(ctx);
    if (mapped !== CollectiveStatus.OK) fail(lastError(lib, ctx, mapped));
  } catch (err) {
    lib.dt_shm_ctx_free(ctx);
    throw err;
  }
  return ctx;
}
