/**
 * The "auto" backend: NCCL for tensors on a GPU, and for tensors in host memory what "gloo"
 * chooses (shared memory on one host), as PyTorch's `init_process_group()` without a backend
 * pairs them. Both connect at init (NCCL only where CUDA is available); the process group sends
 * each collective to the communicator that reaches its tensors (backends.ts).
 * @module
 */

import { cuda } from "../tensor/device/mod.ts";
import type { Backend } from "./backend.ts";
import type { Connected, Rendezvous } from "./backends.ts";
import { NcclBackend } from "./nccl.ts";

/**
 * Connects the host-memory communicator, then NCCL when CUDA is available, each under its own
 * store prefix.
 *
 * @param rendezvous The group, this rank's GPU and the host layout.
 * @param connectHost Connects what "gloo" would choose for the same group.
 * @returns Both communicators, or the host one and why GPU memory is out of reach.
 * @throws DistError from either rendezvous.
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
  if (!cuda.isAvailable()) {
    return {
      backends: host.backends,
      unreachable: `CUDA is not available: ${cuda.unavailableReason()}`,
    };
  }
  let nccl: Backend;
  try {
    nccl = await NcclBackend.connect({ ...init, prefix: `${init.prefix}nccl/`, device });
  } catch (err) {
    host.backends.forEach((b) => b.close());
    throw err;
  }
  return { backends: [...host.backends, nccl], unreachable: "" };
}
