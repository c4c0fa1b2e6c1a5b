/**
 * Worker for the tests of shared-memory setup (shm_setup_test.ts). MODE picks the scenario:
 * - "setup": prints "init", initialises the group, prints "alloc", makes two shared tensors
 *   (16 and 8 MiB a rank), all-reduces them and exits: the test SIGKILLs a rank at chosen
 *   moments of that;
 * - "fsize": lowers its file size limit to FSIZE bytes (as `ulimit -f` would), then initialises
 *   the group over shared memory, and reports the error;
 * - "in-place": makes a shared tensor past the in-place threshold, reports whether it lies in a
 *   mapping of /dev/shm and its all-reduced sum;
 * - "bits": all-reduces (sum, avg) the same data, random magnitudes 1e-3..1e3 of either sign,
 *   once in a shared tensor (in place) and once in a private one (staged), and reports how many
 *   elements differ in their bits, from each other and from the sum in rank order computed here.
 * @module
 */

import {
  allReduce,
  destroyProcessGroup,
  emptyShared,
  getRank,
  getWorldSize,
  initProcessGroup,
} from "../../../src/distributed/mod.ts";
import type { Tensor } from "../../../src/tensor/tensor.ts";
import { envInt, runWorker, tensorOf } from "../../_harness/worker.ts";

const mode = Deno.env.get("MODE");

/** A typed-array view of `t`'s memory (cpu, contiguous f32). */
function viewOf(t: Tensor): Float32Array {
  return new Float32Array(Deno.UnsafePointerView.getArrayBuffer(t.ptr!, t.numel() * 4));
}

/** The file behind the mapping that holds `t`'s memory, from /proc/self/maps ("" if none). */
function mappedFile(t: Tensor): string {
  const at = Deno.UnsafePointer.value(t.ptr!) as bigint;
  for (const line of Deno.readTextFileSync("/proc/self/maps").split("\n")) {
    const [range, , , , , ...path] = line.split(/\s+/);
    const [start, end] = (range ?? "").split("-").map((h) => BigInt(`0x${h || 0}`));
    if (at >= start && at < end) return path.join(" ");
  }
  return "";
}

/** Rank `rank`'s data: f32 of random magnitude in [1e-3, 1e3) and random sign. */
function bitsData(rank: number, n: number): Float32Array {
  let s = (rank + 1) * 2654435761;
  const next = () => (s = (Math.imul(s, 1103515245) + 12345) >>> 0) / 2 ** 32;
  return Float32Array.from({ length: n }, () => (next() < 0.5 ? -1 : 1) * 10 ** (6 * next() - 3));
}

/** The f32 sum of every rank's data in the order `ranks`, divided by their count for avg. */
function reference(all: Float32Array[], ranks: number[], op: "sum" | "avg"): Float32Array {
  const out = Float32Array.from(all[ranks[0]]);
  for (const r of ranks.slice(1)) for (let i = 0; i < out.length; i++) out[i] += all[r][i];
  if (op === "avg") { for (let i = 0; i < out.length; i++) out[i] /= ranks.length; }
  return out;
}

/** Elements whose bits differ. */
function differing(a: Float32Array, b: Float32Array): number {
  const x = new Uint32Array(a.buffer, a.byteOffset, a.length);
  const y = new Uint32Array(b.buffer, b.byteOffset, b.length);
  let n = 0;
  for (let i = 0; i < x.length; i++) if (x[i] !== y[i]) n++;
  return n;
}

/** Lowers this process's soft file size limit (RLIMIT_FSIZE) to `bytes`, as `ulimit -f`. */
function limitFileSize(bytes: number): void {
  const libc = Deno.dlopen("libc.so.6", {
    getrlimit: { parameters: ["i32", "buffer"], result: "i32" },
    setrlimit: { parameters: ["i32", "buffer"], result: "i32" },
  });
  const RLIMIT_FSIZE = 1;
  const limit = new BigUint64Array(2); // struct rlimit { rlim_cur, rlim_max }
  if (libc.symbols.getrlimit(RLIMIT_FSIZE, limit) !== 0) throw new Error("getrlimit failed");
  limit[0] = BigInt(bytes);
  if (libc.symbols.setrlimit(RLIMIT_FSIZE, limit) !== 0) throw new Error("setrlimit failed");
  libc.close();
}

await runWorker(async () => {
  const timeoutMs = envInt("TEST_TIMEOUT_MS", 20_000);
  if (mode === "fsize") limitFileSize(envInt("FSIZE", 1 << 20));
  console.log("init");
  await initProcessGroup({ timeoutMs });
  if (mode === "setup") {
    console.log("alloc");
    const a = await emptyShared([1 << 22]);
    const b = await emptyShared([1 << 21]);
    a.fill_(1);
    b.fill_(2);
    await allReduce(a);
    await allReduce(b);
    const sums = [viewOf(a)[0], viewOf(b)[0]];
    await destroyProcessGroup();
    return { sums };
  }
  if (mode === "fsize") throw new Error("initProcessGroup succeeded under the file size limit");
  if (mode === "in-place") {
    const t = await emptyShared([1 << 20]);
    t.fill_(getRank() + 1);
    await allReduce(t);
    const result = { file: mappedFile(t), sum: viewOf(t)[0] };
    await destroyProcessGroup();
    return result;
  }
  if (mode === "bits") {
    // 8 MiB of f32, in place (past 512 KiB): some 50 claims of blocks for 3 ranks, 4 times per
    // op, so that every rank reduces some blocks even when its thread is late to wake.
    const n = 1 << 21;
    const all = Array.from({ length: getWorldSize() }, (_, r) => bitsData(r, n));
    const ranks = all.map((_, r) => r);
    const result: Record<string, unknown> = {};
    for (const op of ["sum", "avg"] as const) {
      const shared = await emptyShared([n]);
      const inOrder = reference(all, ranks, op);
      let inPlaceVsStaged = 0, stagedVsRankOrder = 0;
      for (let round = 0; round < 4; round++) {
        viewOf(shared).set(all[getRank()]);
        const staged = Float32Array.from(all[getRank()]);
        await allReduce(shared, op);
        await allReduce(tensorOf(staged), op);
        inPlaceVsStaged += differing(viewOf(shared), staged);
        stagedVsRankOrder += differing(staged, inOrder);
      }
      result[op] = {
        file: mappedFile(shared),
        inPlaceVsStaged,
        stagedVsRankOrder,
        // The data is such that another order of summation changes the bits.
        reverseVsRankOrder: differing(reference(all, ranks.toReversed(), op), inOrder),
      };
      shared.dispose();
    }
    await destroyProcessGroup();
    return result;
  }
  throw new Error(`unknown MODE ${mode}`);
});
