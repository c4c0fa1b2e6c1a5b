/**
 * The "auto" backend: NCCL for tensors on a GPU, the emu backend for tensors on an emulated
 * device, and for tensors in host memory what "gloo" chooses (shared memory on one host), as
 * PyTorch's `init_process_group()` without a backend pairs them. All connect at init, each under
 * its own store prefix: NCCL only where CUDA is available, emu only where the group is on one
 * host (its transport is shared memory). That costs every "auto" group one more shared-memory
 * segment, mapped whether or not it ever sees an emulated tensor: a rendezvous at the first emu
 * collective instead could not serve the blocking and started all-gathers, which cannot await
 * one. The process group sends each collective to the communicator that reaches its tensors
 * (backends.ts), and says why memory with none is out of reach.
 * @module
 */

import { cuda } from "../tensor/device/mod.ts";
import type { Backend } from "./backend.ts";
import type { Connected, Memory, Rendezvous } from "./backends.ts";
import { connectEmu, emuUnreachable } from "./emu.ts";
import { NcclBackend } from "./nccl.ts";

/**
 * "yes" when every rank of the group has a GPU of its own (cuda:<local rank>), else why not. NCCL
 * needs all ranks or none: a rank without a GPU (CUDA missing, or more ranks on a host than it has
 * GPUs) would leave the others waiting at the NCCL rendezvous until its timeout. An all-reduce of
 * one flag over the host communicator makes every rank take the same decision.
 */
async function everyRankHasGpu(host: Backend, device: number): Promise<string> {
  const mine = !cuda.isAvailable()
    ? `CUDA is not available: ${cuda.unavailableReason()}`
    : device >= cuda.deviceCount()
    ? `this rank's GPU cuda:${device} (its local rank) does not exist: the host has ` +
      `${cuda.deviceCount()} GPU${cuda.deviceCount() === 1 ? "" : "s"}`
    : "yes";
  const flag = Int32Array.of(mine === "yes" ? 1 : 0);
  await host.allReduce({ ptr: Deno.UnsafePointer.of(flag), count: 1, dtype: "i32" }, "min");
  if (flag[0] === 1) return "yes";
  return mine === "yes"
    ? "another rank of the group has no GPU of its own, so NCCL cannot connect"
    : mine;
}

/**
 * Connects the host-memory communicator, then NCCL when every rank has a GPU of its own, then the
 * emu one when every member is on this host.
 *
 * @param rendezvous The group, this rank's device and the host layout.
 * @param connectHost Connects what "gloo" would choose for the same group.
 * @returns The communicators, and why the memory without one is out of reach.
 * @throws DistError from any rendezvous (the communicators connected before it are closed).
 * @ignore dtrain-internal
 */
export async function connectAuto(
  rendezvous: Rendezvous,
  connectHost: (rendezvous: Rendezvous) => Promise<Connected>,
): Promise<Omit<Connected, "name">> {
  const { init, device } = rendezvous;
  const host = await connectHost({
    ...rendezvous,
    init: { ...init, prefix: `${init.prefix}gloo/` },
  });
  const backends: Backend[] = [...host.backends];
  const unreachable: Partial<Record<Memory, string>> = {};
  try {
    const gpus = await everyRankHasGpu(host.backends[0], device);
    if (gpus === "yes") {
      backends.push(await NcclBackend.connect({ ...init, prefix: `${init.prefix}nccl/`, device }));
    } else {
      unreachable.cuda = gpus;
    }
    // Every member agrees on this (the layout came through the store), so all or none meet.
    const apart = emuUnreachable(rendezvous.oneHost);
    if (apart) unreachable.emu = apart;
    else backends.push(await connectEmu(rendezvous, false));
  } catch (err) {
    backends.forEach((b) => b.close());
    throw err;
  }
  return { backends, unreachable };
}
