/**
 * clipGradNorm's partial sums across a process group (see [Note: sharded gradients] in
 * src/nn/utils/clip_grad.ts): the one gatherer FSDP and tensor parallelism register for their
 * shards, one per group and device, so that parameters of the same groups share one gather.
 * @module
 */

import type { ProcessGroup } from "../distributed/process_group.ts";
import type { GatherPartials } from "../nn/utils/clip_grad.ts";
import { tensor } from "../tensor/creation.ts";
import type { Device } from "../tensor/storage.ts";
import { Tensor } from "../tensor/tensor.ts";

const gatherers = new WeakMap<ProcessGroup, Map<Device, GatherPartials>>();

/**
 * One number from every rank of `group`, in rank order, by a blocking all-gather on `device`
 * (the shards' device, the one the group's backend reaches for them). The same function for the
 * same group and device.
 *
 * @param group The group the parameter is sharded over.
 * @param device Where the shards live.
 */
export function partialsGatherer(group: ProcessGroup, device: Device): GatherPartials {
  const byDevice = gatherers.get(group) ?? new Map<Device, GatherPartials>();
  gatherers.set(group, byDevice);
  let gather = byDevice.get(device);
  if (gather === undefined) {
    gather = (partial) => {
      const mine = tensor([partial], undefined, { device });
      const all = Tensor.empty([group.size], "f32", false, device);
      try {
        group.allGatherBlocking(all, mine);
        return Array.from(all.toArray());
      } finally {
        mine.dispose();
        all.dispose();
      }
    };
    byDevice.set(device, gather);
  }
  return gather;
}
