/** Checking that every rank of a job resumed from the same snapshot. @module */

import { allGather } from "../distributed/mod.ts";
import { tensor, zeros } from "../tensor/creation.ts";

/**
 * Ranks that resumed from different snapshots (a path on a disk of each node's own, say) would
 * run different epochs and hang or diverge: every rank calls this after loading, before training.
 *
 * @param path The snapshot path, for the message.
 * @param worldSize The number of ranks.
 * @param loaded Whether this rank found a snapshot, its epochs, and a checksum of what it loaded
 *   (of the model, or of a sharded snapshot's index: `of` says which).
 * @throws Error on every rank, naming what each rank loaded, when they differ.
 */
export async function checkResumeAcrossRanks(
  path: string,
  worldSize: number,
  loaded: { found: boolean; epochsRun: number; checksum: number; of: "model" | "snapshot" },
): Promise<void> {
  const { found, epochsRun, checksum: sum, of } = loaded;
  const mine = tensor(Int32Array.from([found ? 1 : 0, epochsRun, found ? sum : 0]));
  const all = zeros([3 * worldSize], { dtype: "i32" });
  try {
    await allGather(all, mine);
    const values = all.toArray();
    const each = Array.from({ length: worldSize }, (_, r) => {
      const [had, epochs, checksum] = values.subarray(3 * r, 3 * r + 3);
      return had
        ? `epoch ${epochs} (${of} checksum ${(checksum >>> 0).toString(16).padStart(8, "0")})`
        : "no snapshot";
    });
    if (each.every((l) => l === each[0])) return;
    const ranksOf = new Map<string, number[]>();
    each.forEach((l, r) => ranksOf.set(l, [...(ranksOf.get(l) ?? []), r]));
    const seen = [...ranksOf].map(([l, ranks]) =>
      `rank${ranks.length > 1 ? "s" : ""} ${ranks.join(", ")}: ${l}`
    );
    throw new Error(
      `resume: the ranks did not load the same snapshot from ${path} ` +
        `(${seen.join("; ")}); put --snapshot on a filesystem every node shares`,
    );
  } finally {
    mine.dispose();
    all.dispose();
  }
}
