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
import {
  exchangeSummaries,
  FAILURE_EVENT,
  reportDiagnosis,
  reportMismatch,
  watchLedgerRequests,
} from "./ledger_exchange.ts";
import { writeLedgerAtExit } from "./ledger_files.ts";
import { ProcessGroup } from "./process_group.ts";
import { StoreClient } from "./store/client.ts";
import { MAX_TIMEOUT_MS } from "./store/protocol.ts";
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

/** Resolves with `work`'s value, or rejects once `ms` (at most `MAX_TIMEOUT_MS`) have passed. */
function within<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer = 0 as unknown as ReturnType<typeof setTimeout>;
  const late = new Promise<never>((_, reject) => {
    const delay = Math.min(ms, MAX_TIMEOUT_MS);
    timer = setTimeout(() => reject(new Error(`no answer within ${delay} ms`)), delay);
  });
  return Promise.race([work, late]).finally(() => clearTimeout(timer));
}

/**
 * [Note: failure diagnosis]
 * Gloo sees only its own sockets. A rank whose neighbour exited because of another rank's
 * death blames the neighbour, a send into a dead peer merely times out, and a timeout in the
 * middle of a transfer names nobody. The store sees every rank: a rank's store connection closes
 * when its process dies. So after a transport failure each rank records its error in the store
 * and polls, for at most DIAGNOSIS_MS, until every other member has either recorded one too or
 * left: members that left without a record died; members still connected without a record by
 * then are hung (a stopped process, a deadlock, a machine that stopped answering). Every rank,
 * the one that hosts the store included, so reports within the collective timeout plus
 * DIAGNOSIS_MS and a few polls. The store host also waits, inside that budget, until the members
 * that reported have finished their own diagnosis, so that its exit does not pull the store from
 * under them.
 */
async function diagnose(w: World, group: ProcessGroup, err: unknown): Promise<unknown> {
  if (err instanceof DistError && err.code === "mismatch" && group.rank >= 0) {
    // Every member sees the same mismatch: their ledgers say which line called what.
    await reportMismatch(w.store, w.prefix, group, w.config.rank, err.message);
    return err;
  }
  if (!(err instanceof DistError) || (err.code !== "peer" && err.code !== "timeout")) return err;
  const me = w.config.rank;
  const others = group.ranks.filter((r) => r !== me);
  const failed = (rank: number) => `${w.prefix}failed/${rank}`;
  const diagnosed = (rank: number) => `${w.prefix}diagnosed/${rank}`;
  const has = (key: string) => w.store.get(key, 0).then(() => true, () => false);
  const started = Date.now();
  // Polls until each of `ranks` has set key(rank) or left the store, or the deadline passes.
  const sort = async (ranks: number[], key: (rank: number) => string, until: number) => {
    for (;;) {
      const alive = new Set(await w.store.connectedRanks());
      const verdict = { reported: [] as number[], gone: [] as number[], silent: [] as number[] };
      for (const r of ranks) {
        if (await has(key(r))) verdict.reported.push(r);
        else if (alive.has(r)) verdict.silent.push(r);
        else verdict.gone.push(r);
      }
      if (verdict.silent.length === 0 || Date.now() >= until) return verdict;
      await new Promise((r) => setTimeout(r, POLL_MS));
    }
  };
  const findCulprits = async () => {
    await w.store.set(failed(me), err.message);
    // Asks every rank of the job for its ledger at once (the culprit of a subgroup's stall is
    // often stuck in another group): the hung ones answer from their watchers.
    const until = started + DIAGNOSIS_MS;
    const ledgers = exchangeSummaries(w.store, w.prefix, FAILURE_EVENT, me, w.group.ranks, until);
    const { reported, gone, silent } = await sort(others, failed, until);
    const { summaries, left } = await ledgers;
    reportDiagnosis(me, summaries, { dead: left });
    await w.store.set(diagnosed(me), "1");
    if (w.server) await sort(reported, diagnosed, started + DIAGNOSIS_MS + LINGER_MS);
    return { dead: gone, hung: silent };
  };
  const notes: string[] = [];
  try {
    const { dead, hung } = await within(findCulprits(), DIAGNOSIS_MS + LINGER_MS + POLL_MS);
    const ranks = (rs: number[]) => `rank${rs.length > 1 ? "s" : ""} ${rs.join(", ")}`;
    if (dead.length) notes.push(`${ranks(dead)} died (left the store without reporting an error)`);
    if (hung.length) {
      notes.push(
        `${ranks(hung)} ${hung.length > 1 ? "are" : "is"} hung (still connected, but reported ` +
          `no error within ${DIAGNOSIS_MS / 1000} s)`,
      );
    }
  } catch {
    notes.push(
      w.config.launcherStore
        ? "the launcher's store does not answer either"
        : "the store does not answer either: rank 0, which hosts it, has probably died or hung",
    );
  }
  if (notes.length === 0) return err;
  return new DistError(err.code, `${err.message}; ${notes.join("; ")}`, { cause: err });
}

/**
 * How long a failing rank waits for the other members to report theirs. With LINGER_MS and a
 * poll it bounds the diagnosis at 1.55 s, inside the "timeout + 2 s" every rank reports by
 * (docs/reference/reliability.md) with room for a loaded machine's scheduling.
 */
const DIAGNOSIS_MS = 1200;
/** How much longer the store host waits for the reporting members to finish their diagnosis. */
const LINGER_MS = 300;
/** Store polling interval during a diagnosis. */
const POLL_MS = 50;

/**
 * Joins the job: hosts or reaches the store, waits for every rank, connects the backend.
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
  const server = config.hostStore
    ? StoreServer.listen({
      hostname: config.storeHost,
      port: config.storePort,
      token: config.token,
    })
    : null;
  let store: StoreClient | null = null;
  let closeLedger = () => {};
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
    const prefix = await joinJob(store, resolved);
    ledgerReset();
    const watch = {
      hostname: config.storeHost,
      port: storePort,
      token: config.token,
      timeoutMs: config.timeoutMs,
    };
    const closeWatcher = await watchLedgerRequests(watch, prefix, config.rank);
    const closeDumps = writeLedgerAtExit(config.rank);
    closeLedger = () => {
      closeWatcher();
      closeDumps();
    };
    const ranks = Array.from({ length: config.worldSize }, (_, i) => i);
    const backend = await connectBackend(resolved, ranks, `${prefix}world/`);
    const w: World = {
      config: resolved,
      group: null!,
      subgroups: [],
      store,
      server,
      prefix,
      closeLedger,
    };
    w.group = new ProcessGroup(ranks, config.rank, backend, (err, g) => diagnose(w, g, err));
    ledgerGroup("world", ranks);
    world = w;
    return w.group;
  } catch (err) {
    closeLedger(); // a backend that failed to connect leaves no watcher or exit hook behind
    store?.close();
    await server?.close();
    throw err;
  }
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
    (err, g) => diagnose(w, g, err),
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
