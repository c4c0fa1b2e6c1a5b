/**
 * Where a group's members run, which decides among the host-memory backends of the table
 * (backends.ts): members report their host through the store (host name, boot id and network
 * namespace: ranks that share all three can map the same `/dev/shm` segment). A group on one host
 * then talks over shared memory, a group with one rank per host over Gloo, anything in between
 * hierarchically. See {@linkcode shmMode} for what `DTRAIN_SHM` chooses.
 * @module
 */

import type { BackendInit } from "./backend.ts";
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
 * Where the members of a group run, for the backends that choose or connect by it.
 * @ignore dtrain-internal (its module is re-exported with `export *`)
 */
export interface HostLayout {
  /**
   * Group ranks per host ({@linkcode groupByHost}), or null when not read or shared memory is off
   * for host memory (`DTRAIN_SHM=0`: the host-memory rows then choose Gloo).
   */
  hosts: number[][] | null;
  /**
   * Whether every member runs on this rank's host, whatever `DTRAIN_SHM` says (a group of one
   * does), or null when not read.
   */
  oneHost: boolean | null;
  /** A connected store client for the shared-memory rendezvous while `hosts` is known. */
  store: StoreClient | null;
}

/**
 * The group's host layout, read through the store when the group has more than one rank and
 * `wanted` is "always", or true while shared memory is on; else with `hosts` and `store` null
 * (and `oneHost` true for a group of one).
 *
 * @param init Rank, size, store and timeout of the group.
 * @param wanted Whether the caller chooses by host: true while shared memory is on, "always"
 *   whatever `DTRAIN_SHM` says (the emu backend's transport is shared memory).
 * @returns The layout; the caller closes its `store` once the backend has connected.
 * @throws DistError when the store exchange fails.
 */
export async function readHostLayout(
  init: BackendInit,
  wanted: boolean | "always",
): Promise<HostLayout> {
  const shared = shmMode() !== "off";
  if (!wanted || init.size === 1 || (wanted !== "always" && !shared)) {
    return { hosts: null, oneHost: init.size === 1 ? true : null, store: null };
  }
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
    return { hosts: shared ? hosts : null, oneHost: hosts.length === 1, store };
  } catch (err) {
    store.close();
    throw err;
  }
}
