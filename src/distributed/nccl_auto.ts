/**
 * The "auto" backend: for tensors in host memory what "gloo" chooses (shared memory on one host),
 * and for each device family with memory of its own the communicator its record names (NCCL for a
 * GPU's, the emu backend for an emulated device's), as PyTorch's `init_process_group()` without a
 * backend pairs them. All connect at init, each under its own store prefix, and only where every
 * rank has a device of the family of its own (NCCL only where CUDA is available) and the
 * communicator's transport spans the group (emu's is shared memory: one host). That costs every
 * "auto" group one more shared-memory segment, mapped whether or not it ever sees an emulated
 * tensor: a rendezvous at the first emu collective instead could not serve the blocking and
 * started all-gathers, which cannot await one. The process group sends each collective to the
 * communicator that reaches its tensors (backends.ts), and says why memory with none is out of
 * reach.
 * @module
 */

import {
  deviceName,
  FAMILIES,
  OWN_MEMORY_FAMILIES,
  type OwnMemoryFamily,
} from "../tensor/device/mod.ts";
import type { Backend } from "./backend.ts";
import type { BackendEntry, BackendKind, Connected, Memory, Rendezvous } from "./backends.ts";

/** "" when this rank has a device of `family` of its own (`family:<local rank>`), else why not. */
function ownDeviceProblem(family: OwnMemoryFamily, device: number): string {
  const { title, unit, isAvailable, unavailableReason, deviceCount } = FAMILIES[family];
  if (!isAvailable()) return `${title} is not available: ${unavailableReason()}`;
  const count = deviceCount();
  return device < count ? "" : `this rank's ${unit} ${deviceName(family, device)} (its local ` +
    `rank) does not exist: the host has ${count} ${unit}${count === 1 ? "" : "s"}`;
}

/**
 * For each of `families`, "" when every rank of the group has a device of it of its own, else why
 * not. A communicator needs all ranks or none: a rank without a device (CUDA missing, or more ranks
 * on a host than it has GPUs) would leave the others waiting at its rendezvous until the timeout.
 * One all-reduce of a flag per family over the host communicator makes every rank decide alike.
 */
async function onEveryRank(
  host: Backend,
  families: readonly OwnMemoryFamily[],
  device: number,
): Promise<string[]> {
  const mine = families.map((family) => ownDeviceProblem(family, device));
  const flags = Int32Array.from(mine, (problem) => problem === "" ? 1 : 0);
  const buffer = { ptr: Deno.UnsafePointer.of(flags), count: flags.length, dtype: "i32" } as const;
  if (flags.length > 0) await host.allReduce(buffer, "min");
  return families.map((family, i) =>
    flags[i] === 1 ? "" : mine[i] || `another rank of the group has no ${FAMILIES[family].unit} ` +
        `of its own, so ${FAMILIES[family].communicator} cannot connect`
  );
}

/**
 * Adds to the group's host-memory communicator the communicator of each family with memory of its
 * own, where every rank has a device of the family and the communicator can serve the group.
 *
 * @param rendezvous The group, this rank's device and the host layout.
 * @param host The host-memory communicators, connected as "gloo" would choose for the group
 *   (under the prefix `gloo/`); closed here when a later rendezvous fails.
 * @param rows The backend table, whose rows connect the families' communicators.
 * @returns The communicators, and why the memory without one is out of reach.
 * @throws DistError from any rendezvous (the communicators connected before it are closed).
 * @ignore dtrain-internal
 */
export async function connectAuto(
  rendezvous: Rendezvous,
  host: Omit<Connected, "name">,
  rows: Readonly<Record<BackendKind, BackendEntry>>,
): Promise<Omit<Connected, "name">> {
  const { init, device } = rendezvous;
  const backends: Backend[] = [...host.backends];
  const unreachable: Partial<Record<Memory, string>> = {};
  try {
    const problems = await onEveryRank(host.backends[0], OWN_MEMORY_FAMILIES, device);
    for (const [i, family] of OWN_MEMORY_FAMILIES.entries()) {
      const kind = FAMILIES[family].communicator;
      // A communicator that reaches host memory too may be connected already, as the host's.
      if (backends.some((backend) => backend.name === kind)) continue;
      // Every member agrees on the layout (it came through the store), so all or none meet.
      const apart = rows[kind].byHost === "always" && !rendezvous.oneHost
        ? `the ${kind} backend's transport is shared memory, and the group's members run on ` +
          "more than one host"
        : "";
      const problem = problems[i] || apart;
      if (problem) {
        unreachable[family] = problem;
        continue;
      }
      const connected = await rows[kind].connect({
        ...rendezvous,
        init: { ...init, prefix: `${init.prefix}${kind}/` },
      });
      backends.push(...connected.backends);
    }
  } catch (err) {
    backends.forEach((b) => b.close());
    throw err;
  }
  return { backends, unreachable };
}
