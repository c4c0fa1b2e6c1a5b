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
 * Connects the host-memory communicator, then NCCL when CUDA is available, then the emu one when
 * every member is on this host.
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
    if (cuda.isAvailable()) {
      backends.push(await NcclBackend.connect({ ...init, prefix: `${init.prefix}nccl/`, device }));
    } else {
      unreachable.cuda = `CUDA is not available: ${cuda.unavailableReason()}`;
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
