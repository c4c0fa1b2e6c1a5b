/**
 * The backend table: for every collective backend its name, how a group connects it, which
 * memory its collectives reach and what it can do. `initProcessGroup` connects through it
 * ({@linkcode connectGroup}) and `ProcessGroup` checks every call against it, so what a backend
 * reaches and can do is data, not an `if` on its name or an optional method. A new backend is
 * one entry here (docs/contributing.md lists the other files it touches).
 * @module
 */

import { FAMILIES, OWN_MEMORY_FAMILIES, type OwnMemoryFamily } from "../tensor/device/mod.ts";
import type { Backend, BackendInit, BackendName } from "./backend.ts";
import type { Capabilities } from "./capabilities.ts";
import { connectEmu } from "./emu.ts";
import { GlooBackend } from "./gloo.ts";
import { NcclBackend } from "./nccl.ts";
import { connectAuto } from "./nccl_auto.ts";
import { type HostLayout, readHostLayout } from "./select_backend.ts";
import { ShmBackend, shmQueued } from "./shm.ts";
import { HierarchicalBackend } from "./shm_hierarchical.ts";

export { type Capabilities, type Capability, CAPABILITY_NAMES } from "./capabilities.ts";

/**
 * Where a tensor's elements live: `"host"` (the CPU's memory, whatever device owns it), or the
 * family of the device whose own memory holds them (`"cuda"` for `cuda:1`, `"emu"` for `emu:0`):
 * each family's memory needs a communicator of its own, the row its record names
 * (src/tensor/device/family.ts: NCCL for a GPU's). `memoryOf` in arguments.ts tells a call's; a
 * family no row reaches (a device registered at run time) is reached by none.
 */
export type Memory = "host" | OwnMemoryFamily;

/**
 * What a backend's `connect` gets: the group, this rank's GPU, and where the members run.
 */
export interface Rendezvous extends HostLayout {
  /** Rank, size, store and timeout of the group. */
  init: BackendInit;
  /**
   * This rank's device index, `cuda:<device>` or `emu:<device>` (its local rank, as torchrun's
   * LOCAL_RANK convention has it).
   */
  device: number;
}

/**
 * The communicators a group connected, each serving the memory its entry reaches.
 */
export interface Connected {
  /** The name the group reports: the backend's, or "auto". */
  name: string;
  /** One communicator per memory the group reaches. */
  backends: Backend[];
  /**
   * Why memory the name promises has no communicator, by memory (`auto` without CUDA: `cuda`;
   * across hosts: `emu`); memory missing here that no communicator reaches was never promised.
   */
  unreachable: Readonly<Partial<Record<Memory, string>>>;
}

/**
 * A row of the table.
 */
export interface BackendEntry {
  /** How it connects, in a line. */
  readonly connects: string;
  /**
   * The memory its collectives reach, from the families' records ({@linkcode reachedBy}); "auto"
   * reaches all, through a communicator each.
   */
  readonly reaches: readonly Memory[];
  /** What it can do; for "auto", each call can what the communicator reaching its tensors can. */
  readonly capabilities: Capabilities;
  /**
   * Whether its communicator keeps its own issue queue: calls may be made while earlier ones
   * run, and run in the order they were made, so the process group issues each collective the
   * moment it is asked for, even from synchronous code (DDP's gradient hooks), and a blocking
   * call runs after those in flight. Otherwise calls are chained, and a blocking call needs
   * none in flight.
   */
  readonly queued: boolean;
  /**
   * Whether choosing or connecting it needs to know which members share a host
   * (select_backend.ts): true while shared memory is on (`DTRAIN_SHM`), "always" whatever
   * `DTRAIN_SHM` says (shared memory is its only transport).
   */
  readonly byHost: boolean | "always";
  /** Whether it serves a group laid out as `hosts` (group ranks per host; null: not read). */
  fits(hosts: number[][] | null): boolean;
  /** Connects this rank's communicators. */
  connect(rendezvous: Rendezvous): Promise<Omit<Connected, "name">>;
}

const NONE: Capabilities = {
  allReduceBlocking: false,
  allGatherBlocking: false,
  allGatherStart: false,
  reduceScatter: false,
  reduceScatterBlocking: false,
  sendRecv: false,
  allocShared: false,
};

/** What every backend has on the calling thread (tensor parallelism's forward and backward). */
const BLOCKING = { allReduceBlocking: true, allGatherBlocking: true, reduceScatterBlocking: true };

/** What the shared-memory transport can do (the "shm" row, and under "emu"). */
const SHM: Capabilities = {
  ...NONE,
  allReduceBlocking: true,
  allGatherBlocking: true,
  allGatherStart: true,
  reduceScatter: true,
  reduceScatterBlocking: true,
  sendRecv: true,
  allocShared: true,
};

const one = async (backend: Promise<Backend>) => ({ backends: [await backend], unreachable: {} });

/**
 * The row that reaches `family`'s own memory: the communicator its record names (the compiler
 * holds every record's name to a row of {@linkcode BACKENDS}).
 *
 * @param family A family whose memory is its own.
 * @returns The row's name.
 */
function communicatorOf(family: OwnMemoryFamily): BackendKind {
  return FAMILIES[family].communicator;
}

/**
 * What the row `kind` reaches: host memory if it is a host communicator, and the own memory of
 * every family whose record names it, so that no row lists a family by hand.
 */
function reachedBy(kind: BackendKind, host: boolean): Memory[] {
  const families = OWN_MEMORY_FAMILIES.filter((family) => communicatorOf(family) === kind);
  return host ? ["host", ...families] : families;
}

/** The name of a row of {@linkcode BACKENDS}, as its communicator reports it. */
export type BackendKind = "gloo" | "shm" | "shm+gloo" | "nccl" | "emu" | "auto";

/** Every backend, by the name its communicator reports. */
export const BACKENDS: Readonly<Record<BackendKind, BackendEntry>> = {
  gloo: {
    connects: "a full mesh of TCP connections (Gloo), met through the store",
    reaches: reachedBy("gloo", true),
    capabilities: {
      ...NONE,
      ...BLOCKING,
      allGatherStart: true,
      reduceScatter: true,
      sendRecv: true,
    },
    queued: false,
    byHost: false,
    fits: (hosts) => hosts === null || hosts.every((members) => members.length === 1),
    connect: ({ init }) => one(GlooBackend.connect(init)),
  },
  shm: {
    connects: "one shared-memory segment of the host, its name passed through the store",
    reaches: reachedBy("shm", true),
    capabilities: SHM,
    get queued() {
      return shmQueued();
    },
    byHost: true,
    fits: (hosts) => hosts !== null && hosts.length === 1,
    connect: ({ init, store }) => one(ShmBackend.connect(init, store!)),
  },
  "shm+gloo": {
    connects: "shared memory within each host, Gloo between one leader per host",
    reaches: reachedBy("shm+gloo", true),
    capabilities: { ...NONE, ...BLOCKING, reduceScatter: true, sendRecv: true },
    queued: false,
    byHost: true,
    fits: (hosts) => hosts !== null,
    connect: ({ init, store, hosts }) => one(HierarchicalBackend.connect(init, store!, hosts!)),
  },
  nccl: {
    connects: "an NCCL communicator on this rank's GPU, its unique id passed through the store",
    reaches: reachedBy("nccl", false),
    capabilities: { ...NONE, ...BLOCKING, reduceScatter: true, sendRecv: true },
    queued: false,
    byHost: false,
    fits: () => true,
    connect: ({ init, device }) => one(NcclBackend.connect({ ...init, device })),
  },
  emu: {
    connects: "the shared-memory transport on this rank's emulated device emu:<local rank>, " +
      "ordered after its queued kernels; one host only",
    reaches: reachedBy("emu", false),
    // The shared-memory transport's, but emulated memory is this process's alone: no shared blocks.
    capabilities: { ...SHM, allocShared: false },
    get queued() {
      return shmQueued();
    },
    byHost: "always",
    fits: () => true,
    connect: (rendezvous) => one(connectEmu(rendezvous)),
  },
  auto: {
    connects: 'what "gloo" chooses for host memory, NCCL for GPU memory where CUDA is, and the ' +
      "emu backend for emulated devices where the group is on one host",
    reaches: ["host", ...OWN_MEMORY_FAMILIES],
    capabilities: NONE,
    queued: false,
    byHost: "always",
    fits: () => true,
    connect: async (rendezvous) => {
      const { init } = rendezvous;
      const hostInit = { ...init, prefix: `${init.prefix}gloo/` };
      return connectAuto(
        rendezvous,
        await connectChoice("gloo", { ...rendezvous, init: hostInit }),
        BACKENDS,
      );
    },
  },
};

/** What each `initProcessGroup({ backend })` may connect: the first entry that fits the group. */
export const REQUESTS: Readonly<Record<BackendName, readonly BackendKind[]>> = {
  gloo: ["gloo", "shm", "shm+gloo"],
  nccl: ["nccl"],
  emu: ["emu"],
  auto: ["auto"],
};

/**
 * The row of the backend named `name`.
 *
 * @param name The name a communicator reports.
 * @returns Its row.
 * @throws Error for a name the table does not have (a backend missing its row).
 */
export function entryOf(name: string): BackendEntry {
  if (!Object.hasOwn(BACKENDS, name)) {
    throw new Error(`backend "${name}" has no row in src/distributed/backends.ts`);
  }
  return BACKENDS[name as BackendKind];
}

async function connectChoice(requested: BackendName, rendezvous: Rendezvous): Promise<Connected> {
  const name = REQUESTS[requested].find((n) => BACKENDS[n].fits(rendezvous.hosts))!;
  return { name, ...await BACKENDS[name].connect(rendezvous) };
}

/**
 * Connects this rank's communicators for a group, as `requested` asks.
 *
 * @param requested The backend `initProcessGroup` was given.
 * @param init Rank, size, store, bind address and timeout of the group.
 * @param device This rank's device index (its local rank).
 * @returns The chosen backend's communicators.
 * @throws DistError naming what failed.
 */
export async function connectGroup(
  requested: BackendName,
  init: BackendInit,
  device: number,
): Promise<Connected> {
  const rows = REQUESTS[requested].map((n) => BACKENDS[n].byHost);
  const byHost = rows.includes("always") ? "always" : rows.includes(true);
  const layout = await readHostLayout(init, byHost);
  try {
    return await connectChoice(requested, { ...layout, init, device });
  } finally {
    layout.store?.close();
  }
}
