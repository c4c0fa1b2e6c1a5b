/**
 * Which backend a group gets. Members report their host through the store (host name, boot id
 * and network namespace: ranks that share all three can map the same `/dev/shm` segment); a group
 * on one host talks over shared memory, a group with one rank per host over Gloo, and anything
 * in between hierarchically (shm_hierarchical.ts). See {@linkcode shmMode} for what `DTRAIN_SHM`
 * chooses.
 * A further backend (NCCL) slots in as one more branch of {@linkcode connectBackend}.
 * @module
 */

import type { Backend, BackendInit } from "./backend.ts";
import { GlooBackend } from "./gloo.ts";
import { ShmBackend } from "./shm.ts";
import { HierarchicalBackend } from "./shm_hierarchical.ts";
import { StoreClient } from "./store/client.ts";

const decoder = new TextDecoder();

/**
 * This process's host identity: host name, boot id, network namespace; or env DTRAIN_SHM_HOST
 * when set (ranks with different values never share memory, e.g. to test a hierarchy on one
 * machine).
 */
export function hostKey(): string {
  const given = Deno.env.get("DTRAIN_SHM_HOST");
  if (given) return given;
  const read = (path: string, how: (p: string) => string) => {
    try {
      return how(path).trim();
    } catch {
      return "?";
    }
  };
  const bootId = read("/proc/sys/kernel/random/boot_id", Deno.readTextFileSync);
  const netns = read("/proc/self/ns/net", Deno.readLinkSync);
  return `${Deno.hostname()}|${bootId}|${netns}`;
}

/**
 * Whether shared memory is used, from env `DTRAIN_SHM`: `"0"` never (Gloo everywhere); otherwise
 * (the default, or `"1"`) wherever ranks share a host: a group on one host talks over it alone
 * (2.62× PyTorch's DDP there, against Gloo's 1.19×, BENCHMARKS.md), a group across hosts
 * hierarchically.
 *
 * @returns "off" or "on".
 */
export function shmMode(): "off" | "on" {
  return Deno.env.get("DTRAIN_SHM") === "0" ? "off" : "on";
}

/**
 * Groups the members by host: each host's group ranks ascending, hosts ordered by their lowest
 * rank, so that every rank derives the same layout.
 *
 * @param keys Each group rank's host key, by group rank.
 * @returns The group ranks of each host.
 *
 * @example Two hosts with two ranks each, interleaved
 * ```ts
 * import assert from "node:assert/strict";
 * import { groupByHost } from "./select_backend.ts";
 * assert.deepEqual(groupByHost(["a", "b", "a", "b"]), [[0, 2], [1, 3]]);
 * ```
 */
export function groupByHost(keys: readonly string[]): number[][] {
  const hosts = new Map<string, number[]>();
  keys.forEach((key, rank) => hosts.set(key, [...(hosts.get(key) ?? []), rank]));
  return [...hosts.values()];
}

/**
 * Connects this rank's communicator for the group described by `init`.
 *
 * @param init Rank, size, store, bind address and timeout of the group.
 * @returns Shared memory, Gloo, or both in a hierarchy, by where the members run.
 * @throws DistError naming what failed.
 */
export async function connectBackend(init: BackendInit): Promise<Backend> {
  const mode = shmMode();
  if (init.size === 1 || mode === "off") return await GlooBackend.connect(init);
  const store = await StoreClient.connect({
    hostname: init.storeHost,
    port: init.storePort,
    token: init.token,
    timeoutMs: init.timeoutMs,
  });
  try {
    const key = (r: number) => `${init.prefix}host/${r}`;
    await store.set(key(init.rank), hostKey());
    const keys = init.globalRanks.map((_, r) => key(r));
    await store.wait(keys, init.timeoutMs);
    const hosts = groupByHost(
      await Promise.all(keys.map(async (k) => decoder.decode(await store.get(k)))),
    );
    if (hosts.length === 1) return await ShmBackend.connect(init, store);
    if (hosts.every((h) => h.length === 1)) return await GlooBackend.connect(init);
    return await HierarchicalBackend.connect(init, store, hosts);
  } finally {
    store.close();
  }
}
