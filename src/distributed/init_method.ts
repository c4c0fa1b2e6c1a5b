/**
 * Turns `initProcessGroup` options and the environment into one resolved configuration:
 * who this rank is, where the store lives, who hosts it, and how Gloo binds.
 * @module
 */

import type { BackendName } from "./backend.ts";
import { REQUESTS } from "./backends.ts";
import { DistError } from "./errors.ts";
import { MAX_TIMEOUT_MS } from "./store/protocol.ts";

/** Options of `initProcessGroup`; anything left out comes from the environment. */
export interface InitOptions {
  /**
   * Communication backend: "gloo" (host memory, the default; ranks that share a host talk over
   * shared memory unless env `DTRAIN_SHM=0`, see `ProcessGroup.backendName`), "nccl" (GPU memory,
   * one GPU per local rank), "emu" (the emulated accelerator's memory, one device `emu:<local
   * rank>` per rank, on one host) or "auto" (NCCL for tensors on a GPU, emu for tensors on an
   * emulated device, and for the rest what "gloo" chooses). What each reaches and can do:
   * src/distributed/backends.ts.
   */
  backend?: BackendName;
  /**
   * "env://" (default: MASTER_ADDR and MASTER_PORT from the environment) or
   * "tcp://host:port" naming the store.
   */
  initMethod?: string;
  /** This process's rank; default env RANK. */
  rank?: number;
  /** Number of processes; default env WORLD_SIZE. */
  worldSize?: number;
  /** Rank on this machine; default env LOCAL_RANK, else `rank`. */
  localRank?: number;
  /** Bound on the rendezvous and on every collective; default 300 000 ms, at most 2³¹−1. */
  timeoutMs?: number;
  /** The job's shared secret; default env DTRAIN_TOKEN. */
  token?: string;
  /**
   * Address Gloo binds to and advertises; default env DTRAIN_GLOO_HOST, else the local address of
   * this rank's connection to the store (the interface that routes to the master).
   */
  host?: string;
  /** Network interface Gloo binds to instead of `host`; default env DTRAIN_GLOO_IFNAME. */
  iface?: string;
}

/** The backends `initProcessGroup` accepts, in the table's order. */
const BACKENDS = Object.keys(REQUESTS) as BackendName[];

/**
 * The configuration `initProcessGroup` works from.
 * @ignore dtrain-internal (its module is re-exported with `export *`)
 */
export interface ResolvedInit {
  backend: BackendName;
  rank: number;
  worldSize: number;
  localRank: number;
  storeHost: string;
  storePort: number;
  /** True when a launcher hosts the store (env DTRAIN_STORE_HOSTED=1); else rank 0 does. */
  launcherStore: boolean;
  /** True when this process must host the store (rank 0, unless a launcher hosts it). */
  hostStore: boolean;
  token: string;
  timeoutMs: number;
  /** Where Gloo binds; "" until init derives it from the store connection. */
  host: string;
  iface: string;
  /** The launcher's restart count (env DTRAIN_RESTART_COUNT): each attempt rendezvouses afresh. */
  restartCount: number;
}

/**
 * Default bound on the rendezvous and on each collective.
 * @ignore dtrain-internal (its module is re-exported with `export *`)
 */
export const DEFAULT_TIMEOUT_MS = 300_000;

function invalid(message: string): DistError {
  return new DistError("invalid", `initProcessGroup: ${message}`);
}

function intFrom(
  name: string,
  option: number | undefined,
  env: string | undefined,
): number | undefined {
  if (option !== undefined) {
    if (!Number.isSafeInteger(option)) throw invalid(`${name} must be an integer, got ${option}`);
    return option;
  }
  if (env === undefined || env === "") return undefined;
  if (!/^\d+$/.test(env.trim())) {
    throw invalid(`env ${name.toUpperCase()} must be a non-negative integer, got "${env}"`);
  }
  return Number(env);
}

/**
 * Resolves options against the environment.
 *
 * @param options What the caller passed to `initProcessGroup`.
 * @param env Reads an environment variable (injectable for tests).
 * @returns The complete configuration.
 * @throws DistError "invalid" naming the missing or malformed setting.
 *
 * @example Resolve a tcp:// init method
 * ```ts
 * import assert from "node:assert/strict";
 * import { resolveInit } from "./init_method.ts";
 * const init = resolveInit(
 *   { initMethod: "tcp://127.0.0.1:29500", rank: 1, worldSize: 2, token: "t" },
 *   () => undefined,
 * );
 * assert.equal(init.storePort, 29500);
 * assert.equal(init.hostStore, false); // only rank 0 hosts the store
 * ```
 * @ignore dtrain-internal (its module is re-exported with `export *`)
 */
export function resolveInit(
  options: InitOptions,
  env: (name: string) => string | undefined = (name) => Deno.env.get(name),
): ResolvedInit {
  const backend = options.backend ?? "gloo";
  if (!BACKENDS.includes(backend)) {
    throw invalid(`unknown backend "${backend}"; use one of ${BACKENDS.join(", ")}`);
  }

  const worldSize = intFrom("worldSize", options.worldSize, env("WORLD_SIZE"));
  if (worldSize === undefined) {
    throw invalid("world size is not set; pass { worldSize } or set env WORLD_SIZE");
  }
  if (worldSize < 1) throw invalid(`world size must be at least 1, got ${worldSize}`);
  const rank = intFrom("rank", options.rank, env("RANK"));
  if (rank === undefined) throw invalid("rank is not set; pass { rank } or set env RANK");
  if (rank < 0 || rank >= worldSize) {
    throw invalid(`rank ${rank} is outside world size ${worldSize}`);
  }
  const localRank = intFrom("localRank", options.localRank, env("LOCAL_RANK")) ?? rank;

  const method = options.initMethod ?? "env://";
  let storeHost: string | undefined;
  let portText: string | undefined;
  if (method === "env://") {
    storeHost = env("MASTER_ADDR");
    portText = env("MASTER_PORT");
    if (!storeHost) throw invalid("env MASTER_ADDR is not set (needed by env://)");
    if (!portText) throw invalid("env MASTER_PORT is not set (needed by env://)");
  } else if (method.startsWith("tcp://")) {
    const m = /^tcp:\/\/(\[[^\]]+\]|[^:/]+):(\d+)\/?$/.exec(method);
    if (!m) throw invalid(`init method "${method}" is not tcp://host:port`);
    storeHost = m[1].replace(/^\[(.*)\]$/, "$1");
    portText = m[2];
  } else {
    throw invalid(`unknown init method "${method}"; use "env://" or "tcp://host:port"`);
  }
  if (!/^\d+$/.test(portText) || Number(portText) > 65535) {
    throw invalid(`store port must be 0..65535, got "${portText}"`);
  }
  const storePort = Number(portText);
  const launcherStore = env("DTRAIN_STORE_HOSTED") === "1";
  const hostStore = rank === 0 && !launcherStore;
  if (storePort === 0 && !(hostStore && worldSize === 1)) {
    throw invalid("store port 0 only works for a single process hosting its own store");
  }

  let token = options.token ?? env("DTRAIN_TOKEN");
  if (!token) {
    if (worldSize > 1) {
      throw invalid(
        "no job token: set env DTRAIN_TOKEN to the same secret on every rank " +
          "(the launcher does this) or pass { token }",
      );
    }
    token = crypto.randomUUID();
  }

  const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  if (!(timeoutMs > 0) || !Number.isFinite(timeoutMs)) {
    throw invalid(`timeoutMs must be a positive number, got ${timeoutMs}`);
  }
  if (Math.ceil(timeoutMs) > MAX_TIMEOUT_MS) {
    throw invalid(
      `timeoutMs must be at most ${MAX_TIMEOUT_MS} (2³¹−1 ms, about 24.8 days), got ${timeoutMs}`,
    );
  }

  const iface = options.iface ?? env("DTRAIN_GLOO_IFNAME") ?? "";
  const host = options.host ?? env("DTRAIN_GLOO_HOST") ?? "";
  const restartCount = intFrom("dtrain_restart_count", undefined, env("DTRAIN_RESTART_COUNT")) ?? 0;

  return {
    backend,
    rank,
    worldSize,
    localRank,
    storeHost,
    storePort,
    launcherStore,
    hostStore,
    token,
    timeoutMs: Math.ceil(timeoutMs),
    host,
    iface,
    restartCount,
  };
}
