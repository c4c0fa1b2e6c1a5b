/**
 * Checks that every rank holds the same parameters (names and shapes) before DDP trusts them, and
 * names the first difference on every rank instead of corrupting data or hanging.
 * @module
 */

import type { ProcessGroup } from "../distributed/mod.ts";
import { allGather } from "../distributed/mod.ts";
import { hash32 } from "../distributed/_agree.ts";
import { tensor, zeros } from "../tensor/creation.ts";
import { DEFAULT_DEVICE } from "../tensor/device/mod.ts";
import { formatShape, sameShape, type Tensor } from "../tensor/tensor.ts";

const MAX_DIMS = 8;
const FIELDS = 2 + MAX_DIMS; // name hash, ndim, dims

/**
 * Where DDP's own small tensors (this check's, the used mask) go: host memory when `group`
 * reaches it, else the device of the first parameter (a device-only group, "nccl" or "emu",
 * reaches its ranks' devices only).
 *
 * @param group The process group.
 * @param params The model's parameters.
 * @returns The device's name.
 */
export function smallTensorDevice(group: ProcessGroup, params: readonly Tensor[]): string {
  const host = group.reaches(DEFAULT_DEVICE) || params.length === 0;
  return host ? DEFAULT_DEVICE : params[0].device;
}

/**
 * Verifies across `group` that the named parameters agree in count, name and shape.
 *
 * @throws Error naming the parameter and the ranks that differ.
 */
export async function verifyParamsAcrossRanks(
  named: readonly [string, Tensor][],
  group: ProcessGroup,
): Promise<void> {
  const size = group.size;
  // i32 on every backend: Gloo, shared memory and NCCL (ncclInt32) all reduce and gather it.
  const device = smallTensorDevice(group, named.map(([, p]) => p));
  const counts = zeros([size], { dtype: "i32", device });
  const own = tensor([named.length], [1], { dtype: "i32", device });
  await allGather(counts, own, group).wait();
  const allCounts = Array.from(counts.toArray());
  counts.dispose();
  own.dispose();
  const me = group.rank;
  const other = allCounts.findIndex((c) => c !== named.length);
  if (other >= 0) {
    throw new Error(
      `DistributedDataParallel: rank ${group.ranks[other]} has ${allCounts[other]} parameters, ` +
        `rank ${group.ranks[me]} has ${named.length}; every rank must wrap the same model`,
    );
  }
  const rows = new Int32Array(named.length * FIELDS);
  named.forEach(([name, p], i) => {
    if (p.ndim > MAX_DIMS) {
      throw new RangeError(
        `DistributedDataParallel: parameter ${name} has more than ${MAX_DIMS} dimensions`,
      );
    }
    rows[i * FIELDS] = hash32(name);
    rows[i * FIELDS + 1] = p.ndim;
    p.shape.forEach((d, j) => (rows[i * FIELDS + 2 + j] = d));
  });
  const mine = tensor(rows, [rows.length], { dtype: "i32", device });
  const gathered = zeros([size * rows.length], { dtype: "i32", device });
  await allGather(gathered, mine, group).wait();
  const all = gathered.toArray() as Int32Array;
  mine.dispose();
  gathered.dispose();
  for (let r = 0; r < size; r++) {
    for (let i = 0; i < named.length; i++) {
      const base = r * rows.length + i * FIELDS;
      const [name, p] = named[i];
      if (all[base] !== rows[i * FIELDS]) {
        throw new Error(
          `DistributedDataParallel: parameter ${i} is named "${name}" on rank ${group.ranks[me]} ` +
            `but has another name on rank ${group.ranks[r]}`,
        );
      }
      const ndim = all[base + 1];
      const shape = Array.from(all.subarray(base + 2, base + 2 + ndim));
      if (!sameShape(shape, p.shape)) {
        throw new Error(
          `DistributedDataParallel: parameter "${name}" has shape ${formatShape(shape)} on rank ${
            group.ranks[r]
          } ` +
            `and ${formatShape(p.shape)} on rank ${group.ranks[me]}`,
        );
      }
    }
  }
}
