/**
 * The emu backend: collectives on the memory of the emulated accelerator (`emu:<local rank>`,
 * src/tensor/device/emu.ts) with NCCL's contract: device tensors only, a communicator per group
 * from a rendezvous through the store, each collective ordered after the kernels queued on the
 * device so far, timeouts that name the missing rank and dead peers named. Emulated memory is
 * native memory of this process, so the transport is the shared-memory backend's (shm.ts): its
 * native thread reads and writes the device pointers directly, and its limit is the emu
 * backend's too: every member on one host.
 *
 * [Note: emu collectives and the queue]
 * A kernel on an emulated device runs later than it is launched (see [Note: emulated stream] in
 * src/tensor/device/emu_queue.ts), as on a GPU. NCCL orders a collective after the compute
 * launched before it with an event on the compute stream (`dt_nccl_mark`); here each collective
 * first runs the device's queue on the JavaScript thread, so the buffer holds what the kernels
 * before it wrote once the transport reads it. Work launched after the collective may not touch
 * its buffers until its promise settles (or, for the blocking and started forms, until it
 * returned or was waited for), as on NCCL. Errors a queued kernel hit stay for the next read.
 * @module
 */

import { BaseBackend } from "./base_backend.ts";
import type { EmuDevice } from "../tensor/device/mod.ts";
import { getDevice } from "../tensor/device/mod.ts";
import type {
  BackendInit,
  NativeBuffer,
  OpTiming,
  P2PMessage,
  PostedP2P,
  ReduceOp,
  StartedCollective,
} from "./backend.ts";
import type { Rendezvous } from "./backends.ts";
import { DistError } from "./errors.ts";
import { ShmBackend } from "./shm.ts";
import { StoreClient } from "./store/client.ts";

/**
 * Why a group laid out so cannot have an emu communicator, or "" when it can.
 *
 * @param oneHost Whether every member runs on this host (null: not known).
 * @returns The reason, for errors ("" when the group is on one host).
 */
export function emuUnreachable(oneHost: boolean | null): string {
  return oneHost
    ? ""
    : "the emu backend's transport is shared memory, and the group's members run on more than " +
      "one host";
}

/**
 * Connects the emu communicator of a group from the table's rendezvous (the "emu" row, and
 * "auto"), under the store prefix `<prefix>emu/`.
 *
 * @param rendezvous The group, this rank's device index and the host layout.
 * @param requireDevice Whether a device `emu:<device>` that does not exist fails the rendezvous
 *   (as for "emu"); "auto" connects anyway (so that its peers meet it) and routes nothing there.
 * @returns The connected backend.
 * @throws DistError "invalid" when the members are on more than one host or this rank's device
 *   does not exist; the shared-memory rendezvous's errors (a member that never came) otherwise.
 * @ignore dtrain-internal
 */
export async function connectEmu(
  rendezvous: Rendezvous,
  requireDevice = true,
): Promise<EmuBackend> {
  const { init, device, oneHost } = rendezvous;
  const who = `emu rendezvous of rank ${init.globalRanks[init.rank]} (group of ${init.size})`;
  const reason = emuUnreachable(oneHost);
  if (reason) throw new DistError("invalid", `${who}: ${reason}`);
  const name = `emu:${device}`;
  if (requireDevice) {
    try {
      getDevice(name);
    } catch (err) {
      throw new DistError(
        "invalid",
        `${who}: this rank's device (its local rank) is ${name}: ${(err as Error).message}`,
      );
    }
  }
  return await EmuBackend.connect(
    { ...init, prefix: `${init.prefix}emu/` },
    name,
    rendezvous.store,
  );
}

/**
 * A communicator over one emulated device per rank, `emu:<device>`. Created by the process group
 * (`initProcessGroup({ backend: "emu" })`, or "auto" for emu tensors); buffers are that device's
 * pointers. What it can do is the shared-memory backend's, minus shared memory (emulated memory
 * is no rank's but this one's).
 */
export class EmuBackend extends BaseBackend {
  readonly name = "emu";
  /** The device whose memory it reaches (`emu:<local rank>`); tensors elsewhere are refused. */
  readonly device: string;
  #shm: ShmBackend;

  private constructor(shm: ShmBackend, device: string) {
    super();
    this.#shm = shm;
    this.device = device;
  }

  /**
   * Maps the group's shared-memory segment (its handle passes through the store under
   * `init.prefix`, so every group has its own) for `device`.
   *
   * @param init Rank, size, job ranks, key prefix and timeout of the group (one host).
   * @param device This rank's device, `emu:<local rank>`.
   * @param store A connected store client for the rendezvous, or null to connect one.
   * @returns The connected backend.
   * @throws DistError from the shared-memory rendezvous (a member that never came).
   */
  static async connect(
    init: BackendInit,
    device: string,
    store: StoreClient | null,
  ): Promise<EmuBackend> {
    const own = store === null
      ? await StoreClient.connect({
        hostname: init.storeHost,
        port: init.storePort,
        token: init.token,
        timeoutMs: init.timeoutMs,
      })
      : null;
    try {
      return new EmuBackend(await ShmBackend.connect(init, own ?? store!), device);
    } finally {
      own?.close();
    }
  }

  /** Runs the device's queue: what the kernels launched so far write is in memory now. */
  #ordered(): ShmBackend {
    (getDevice(this.device) as EmuDevice).queue.run();
    return this.#shm;
  }

  allReduce(buf: NativeBuffer, op: ReduceOp): Promise<OpTiming> {
    return this.#ordered().allReduce(buf, op);
  }

  /** The all-reduce on the JavaScript thread, after the queued kernels (see shm.ts). */
  override allReduceBlocking(buf: NativeBuffer, op: ReduceOp): OpTiming {
    return this.#ordered().allReduceBlocking(buf, op);
  }

  broadcast(buf: NativeBuffer, root: number): Promise<OpTiming> {
    return this.#ordered().broadcast(buf, root);
  }

  allGather(outs: NativeBuffer[], input: NativeBuffer): Promise<OpTiming> {
    return this.#ordered().allGather(outs, input);
  }

  /** The all-gather on the JavaScript thread, after the queued kernels (see shm.ts). */
  override allGatherBlocking(outs: NativeBuffer[], input: NativeBuffer): void {
    this.#ordered().allGatherBlocking(outs, input);
  }

  /** The all-gather on a native thread, started after the queued kernels (see shm.ts). */
  override allGatherStart(outs: NativeBuffer[], input: NativeBuffer): StartedCollective {
    return this.#ordered().allGatherStart(outs, input);
  }

  override reduceScatter(out: NativeBuffer, input: NativeBuffer, op: ReduceOp): Promise<OpTiming> {
    return this.#ordered().reduceScatter(out, input, op);
  }

  /** The reduce-scatter on the JavaScript thread, after the queued kernels (see shm.ts). */
  override reduceScatterBlocking(out: NativeBuffer, input: NativeBuffer, op: ReduceOp): OpTiming {
    return this.#ordered().reduceScatterBlocking(out, input, op);
  }

  barrier(): Promise<OpTiming> {
    return this.#ordered().barrier();
  }

  /**
   * A message through the shared-memory transport, posted after the queued kernels: a send reads
   * what they wrote, a receive lands after what they write.
   */
  override postP2P(message: P2PMessage): PostedP2P {
    return this.#ordered().postP2P(message);
  }

  close(): void {
    this.#shm.close();
  }
}
