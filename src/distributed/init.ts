/**
 * The process-wide distributed state: `initProcessGroup` joins the job (hosting the store on
 * rank 0 unless a launcher does), `newGroup` carves out subgroups, `destroyProcessGroup`
 * leaves. Mirrors `torch.distributed`'s module-level API.
 * @module
 */

import { type Connected, connectGroup } from "./backends.ts";
import { DistError } from "./errors.ts";
import { type InitOptions, type ResolvedInit, resolveInit } from "./init_method.ts";
import { ledgerEnvProblem, ledgerGroup, ledgerReset } from "./ledger.ts";
import { watchLedgerRequests } from "./ledger_exchange.ts";
import { diagnoseFailure } from "./failure_diagnosis.ts";
import { writeLedgerAtExit } from "./ledger_files.ts";
import { ProcessGroup } from "./process_group.ts";
import { StoreClient } from "./store/client.ts";
import { StoreServer } from "./store/server.ts";

interface World {
  config: ResolvedInit;
  group: ProcessGroup;
  subgroups: ProcessGroup[];
  store: StoreClient;
  server: StoreServer | null;
  /** Store key prefix of this initialization (see joinJob). */
  prefix: string;
  /** Stops the ledger's watcher and dumps (ledger_exchange.ts). */
  closeLedger: () => void;
}

let world: World | null = null;

function requireWorld(what: string): World {
  if (world === null) {
    throw new DistError(
      "invalid",
      `${what}: the process group is not initialized; call initProcessGroup() first`,
    );
  }
  return world;
}

/** Connects this rank's communicators among `ranks` (job ranks, ascending), from the table. */
function connectBackend(
  config: ResolvedInit,
  ranks: readonly number[],
  prefix: string,
): Promise<Connected> {
  const { storeHost, storePort, token, host, iface, timeoutMs } = config;
  const init = {
    rank: ranks.indexOf(config.rank),
    size: ranks.length,
    globalRanks: ranks,
    prefix,
    storeHost,
    storePort,
    token,
    host,
    iface,
    timeoutMs,
  };
  // One GPU per local rank, as torchrun's LOCAL_RANK convention has it.
  return connectGroup(config.backend, init, config.localRank);
}

/**
 * Counts this rank in and waits until all `worldSize` ranks have, so that a missing rank shows
 * up as a count of who joined (and who did not) rather than as a timeout deep inside Gloo.
 * Returns the key prefix of this initialization: each rank counts its own inits, so ranks
 * that re-initialize against a long-lived launcher store agree on a fresh namespace.
 */
async function joinJob(store: StoreClient, config: ResolvedInit): Promise<string> {
  const attempt = `dtrain/a${config.restartCount}`;
  const generation = await store.add(`${attempt}/inits/rank${config.rank}`, 1);
  const prefix = `${attempt}/g${generation}/`;
  const joined = `${prefix}joined`;
  if (await store.add(joined, 1) === config.worldSize) await store.set(`${prefix}all`, "1");
  try {
    await store.wait([`${prefix}all`], config.timeoutMs);
  } catch (err) {
    if (!(err instanceof DistError) || err.code !== "timeout") throw err;
    const count = await store.add(joined, 0);
    const connected = new Set(await store.connectedRanks());
    const missing = Array.from({ length: config.worldSize }, (_, r) => r)
      .filter((r) => !connected.has(r));
    const shown = missing.slice(0, 8).join(", ") + (missing.length > 8 ? ", ..." : "");
    throw new DistError(
      "timeout",
      `Timed out after ${config.timeoutMs / 1000} s waiting for clients: ` +
        `${count}/${config.worldSize} joined` +
        (missing.length ? ` (missing: rank${missing.length > 1 ? "s" : ""} ${shown})` : ""),
    );
  }
  return prefix;
}

/**
 * Joins the job in three steps: joins the store (hosting it or reaching it, and waiting for every
 * rank), opens the ledger, connects the backend.
 *
 * With `initMethod` "env://" (the default) it reads RANK, WORLD_SIZE, LOCAL_RANK,
 * MASTER_ADDR, MASTER_PORT and DTRAIN_TOKEN. Rank 0 hosts the store on MASTER_ADDR:MASTER_PORT
 * unless env DTRAIN_STORE_HOSTED is "1" (a launcher hosts it).
 *
 * @param options Overrides of the environment; see InitOptions.
 * @returns The world process group.
 * @throws DistError naming the bad setting, the busy address, or how many ranks joined.
 *
 * @example A single-process job
 * ```ts
 * import assert from "node:assert/strict";
 * import { destroyProcessGroup, getWorldSize, initProcessGroup } from "./init.ts";
 * await initProcessGroup({ initMethod: "tcp://127.0.0.1:0", rank: 0, worldSize: 1 });
 * assert.equal(getWorldSize(), 1);
 * await destroyProcessGroup();
 * ```
 */
export async function initProcessGroup(options: InitOptions = {}): Promise<ProcessGroup> {
  if (world !== null) {
    throw new DistError("invalid", "initProcessGroup: already initialized in this process");
  }
  const config = resolveInit(options);
  const ledgerProblem = ledgerEnvProblem();
  if (ledgerProblem) throw new DistError("invalid", `initProcessGroup: ${ledgerProblem}`);
  const joined = await joinStore(config);
  let closeLedger = () => {};
  try {
    closeLedger = await openLedger(joined);
    const ranks = Array.from({ length: config.worldSize }, (_, i) => i);
    const backend = await connectBackend(joined.config, ranks, `${joined.prefix}world/`);
    const w: World = { ...joined, group: null!, subgroups: [], closeLedger };
    w.group = new ProcessGroup(ranks, config.rank, backend, (err, g) => diagnoseFailure(w, g, err));
    ledgerGroup("world", ranks);
    world = w;
    return w.group;
  } catch (err) {
    closeLedger(); // a backend that failed to connect leaves no watcher or exit hook behind
    joined.store.close();
    await joined.server?.close();
    throw err;
  }
}

/** The job's store, joined: who hosts it, this rank's client, and this initialization's keys. */
interface Joined {
  /** The settings, with the store's port and the address Gloo advertises resolved. */
  config: ResolvedInit;
  store: StoreClient;
  server: StoreServer | null;
  /** Store key prefix of this initialization (see joinJob). */
  prefix: string;
}

/**
 * The first step of `initProcessGroup`: hosts the store (rank 0, unless a launcher does) or
 * reaches it, and waits until every rank has joined.
 */
async function joinStore(config: ResolvedInit): Promise<Joined> {
  const server = config.hostStore
    ? StoreServer.listen({
      hostname: config.storeHost,
      port: config.storePort,
      token: config.token,
    })
    : null;
  let store: StoreClient | null = null;
  try {
    const storePort = server?.port ?? config.storePort;
    store = await StoreClient.connect({
      hostname: config.storeHost,
      port: storePort,
      token: config.token,
      rank: config.rank,
      timeoutMs: config.timeoutMs,
    });
    // Unless told otherwise, Gloo advertises the address this rank reaches the store from, which
    // peers on other nodes can reach too (the host name may resolve to a loopback address).
    const host = config.host || (config.iface ? "" : store.localAddress);
    const resolved = { ...config, storePort, host };
    return { config: resolved, store, server, prefix: await joinJob(store, resolved) };
  } catch (err) {
    store?.close();
    await server?.close();
    throw err;
  }
}

/**
 * The second step: a fresh ledger, the watcher that answers other ranks' requests for it during
 * a diagnosis, and its dump at exit.
 *
 * @returns What stops both.
 */
async function openLedger({ config, prefix }: Joined): Promise<() => void> {
  ledgerReset();
  const watch = {
    hostname: config.storeHost,
    port: config.storePort,
    token: config.token,
    timeoutMs: config.timeoutMs,
  };
  const closeWatcher = await watchLedgerRequests(watch, prefix, config.rank);
  const closeDumps = writeLedgerAtExit(config.rank);
  return () => {
    closeWatcher();
    closeDumps();
  };
}

/** Whether `initProcessGroup` has completed and `destroyProcessGroup` has not been called. */
export function isInitialized(): boolean {
  return world !== null;
}

/**
 * This process's rank in `group` (default: the world), or -1 if it is not a member.
 * @throws DistError "invalid" before initProcessGroup.
 */
export function getRank(group?: ProcessGroup): number {
  return (group ?? requireWorld("getRank").group).rank;
}

/**
 * Number of ranks in `group` (default: the world).
 * @throws DistError "invalid" before initProcessGroup.
 */
export function getWorldSize(group?: ProcessGroup): number {
  return (group ?? requireWorld("getWorldSize").group).size;
}

/**
 * This process's rank on its machine (env LOCAL_RANK, else its rank).
 * @throws DistError "invalid" before initProcessGroup.
 */
export function getLocalRank(): number {
  return requireWorld("getLocalRank").config.localRank;
}

/** The world group. @throws DistError "invalid" before initProcessGroup. */
export function worldGroup(what = "worldGroup"): ProcessGroup {
  const w = requireWorld(what);
  if (w.group.destroyed) throw new DistError("invalid", `${what}: process group was destroyed`);
  return w.group;
}

/**
 * Creates a subgroup. Every rank of the world must call it, in the same order, with the same
 * ranks; members connect a new communicator, the others get a group they cannot use.
 *
 * @param ranks Global ranks of the members (any order, no duplicates).
 * @returns The group; on non-members its `rank` is -1.
 * @throws DistError "invalid" for a rank outside the world or a duplicate.
 */
export async function newGroup(ranks: number[]): Promise<ProcessGroup> {
  const w = requireWorld("newGroup");
  const sorted = [...ranks].sort((a, b) => a - b);
  sorted.forEach((r, i) => {
    if (!Number.isInteger(r) || r < 0 || r >= w.config.worldSize) {
      throw new DistError(
        "invalid",
        `newGroup: rank ${r} is outside world size ${w.config.worldSize}`,
      );
    }
    if (i > 0 && sorted[i - 1] === r) {
      throw new DistError("invalid", `newGroup: rank ${r} is listed twice`);
    }
  });
  const id = w.subgroups.length + 1;
  const rank = sorted.indexOf(w.config.rank);
  const backend = rank < 0
    ? null
    : await connectBackend(w.config, sorted, `${w.prefix}group${id}/`);
  const group = new ProcessGroup(
    sorted,
    rank,
    backend,
    (err, g) => diagnoseFailure(w, g, err),
    `group${id}`,
  );
  w.subgroups.push(group);
  ledgerGroup(group.name, sorted);
  return group;
}

/**
 * Leaves the job: lets collectives in flight finish, closes every communicator and the
 * store (stopping it on the rank that hosts it). Safe to call when not initialized.
 */
export async function destroyProcessGroup(): Promise<void> {
  const w = world;
  if (w === null) return;
  world = null;
  await Promise.all([w.group, ...w.subgroups].map((g) => g.destroy()));
  w.closeLedger();
  w.store.close();
  await w.server?.close();
}
