/**
 * Worker for the shared-memory tests. MODE picks the scenario:
 * - "compare": runs every collective on the world group (shared memory) and on a Gloo subgroup
 *   of the same ranks, on random data crossing the 4 MiB staging slot, and reports the largest
 *   differences (f32 relative, i32 absolute) and both backends' names;
 * - "dump": runs a fixed series of collectives on the world group and writes the results to
 *   OUT_DIR/rank<N>.json (used across hosts, where the launcher runs this script);
 * - "loop": all-reduces forever, printing "looping" once warmed up ("shared-loop": on a tensor
 *   from emptyShared, reduced in place);
 * - "shared": all-reduces tensors from emptyShared (below and above the in-place threshold, and a
 *   view at an offset) and the same data on a Gloo subgroup, reporting the largest differences
 *   and the dtrain segments left in /dev/shm;
 * - "shared-mismatch": rank 0 all-reduces a shared tensor, the others a private one of the same
 *   size; reports the errors, then whether the group still works;
 * - "shared-dead": rank 1 exits instead of calling emptyShared; rank 0 reports its error;
 * - "shared-full": every rank asks emptyShared for more than /dev/shm holds, then all-reduces;
 * - "auto": under the "auto" backend, asks for shared memory and sums each rank's `rank + 1`.
 * @module
 */

import {
  allGather,
  allReduce,
  barrier,
  broadcast,
  destroyProcessGroup,
  type DistError,
  emptyShared,
  getRank,
  getWorldSize,
  initProcessGroup,
  newGroup,
  reduceScatter,
  worldGroup,
} from "../../../src/distributed/mod.ts";
import type { ProcessGroup } from "../../../src/distributed/mod.ts";
import type { Tensor } from "../../../src/tensor/tensor.ts";
import { envInt, runWorker, tensorOf } from "../../_harness/worker.ts";

const mode = Deno.env.get("MODE");

/** Deterministic data of rank `rank`: f32 in [-1, 1) or i32 in [-1000, 1000). */
function data(rank: number, n: number, dtype: "f32" | "i32", salt: number) {
  let s = (rank + 1) * 7919 + salt * 104729;
  const next = () => (s = (Math.imul(s, 1103515245) + 12345) >>> 0) / 2 ** 32;
  return dtype === "f32"
    ? Float32Array.from({ length: n }, () => next() * 2 - 1)
    : Int32Array.from({ length: n }, () => Math.floor(next() * 2000) - 1000);
}

/** Every collective on `group`, outputs by name. */
async function series(
  group: ProcessGroup,
  big: number,
): Promise<Map<string, Float32Array | Int32Array>> {
  const rank = group.rank;
  const size = group.size;
  const out = new Map<string, Float32Array | Int32Array>();
  for (const dtype of ["f32", "i32"] as const) {
    for (const op of ["sum", "max", "min", ...(dtype === "f32" ? ["avg"] as const : [])] as const) {
      // Past one 4 MiB staging chunk for the reductions that differ in how they combine.
      for (const n of op === "sum" || op === "avg" ? [1, 1001, big] : [1, 1001]) {
        const x = data(rank, n, dtype, n);
        await allReduce(tensorOf(x), op, group);
        out.set(`allReduce ${op} ${dtype} ${n}`, x);
      }
    }
    for (const chunk of [3, Math.ceil(big / size)]) {
      const x = data(rank, size * chunk, dtype, chunk);
      const y = dtype === "f32" ? new Float32Array(chunk) : new Int32Array(chunk);
      await reduceScatter(tensorOf(y), tensorOf(x), "sum", group);
      out.set(`reduceScatter sum ${dtype} ${chunk}`, y);
    }
    const n = Math.ceil(big / size);
    const mine = data(rank, n, dtype, 5);
    const flat = dtype === "f32" ? new Float32Array(size * n) : new Int32Array(size * n);
    await allGather(tensorOf(flat), tensorOf(mine), group);
    out.set(`allGather ${dtype} ${n}`, flat);
    for (let root = 0; root < size; root++) {
      const x = data(rank, root === 0 ? big : 1001, dtype, 50 + root);
      await broadcast(tensorOf(x), group.ranks[root], group);
      out.set(`broadcast ${dtype} root ${root}`, x);
    }
  }
  await barrier(group);
  return out;
}

/** Largest difference: relative (to 1 + |b|) for f32, absolute for i32. */
function diff(a: Float32Array | Int32Array, b: Float32Array | Int32Array): number {
  if (a.length !== b.length) return Infinity;
  let worst = 0;
  for (let i = 0; i < a.length; i++) {
    const d = Math.abs(a[i] - b[i]) / (a instanceof Float32Array ? 1 + Math.abs(b[i]) : 1);
    worst = Math.max(worst, d);
  }
  return worst;
}

/** A typed-array view of `t`'s memory (cpu, contiguous). */
function viewOf(t: Tensor): Float32Array | Int32Array {
  const bytes = Deno.UnsafePointerView.getArrayBuffer(t.ptr!, t.numel() * 4);
  return t.dtype === "i32" ? new Int32Array(bytes) : new Float32Array(bytes);
}

/** Our segment names now in /dev/shm. */
function segments(): string[] {
  return [...Deno.readDirSync("/dev/shm")].map((e) => e.name).filter((n) =>
    n.startsWith("dtrain-")
  );
}

/** Every shared-buffer case on `world`, against the same data on `gloo`. */
async function sharedSeries(world: ProcessGroup, gloo: ProcessGroup, big: number) {
  const rank = world.rank;
  const worst = { f32: 0, i32: 0 };
  let compared = 0, zeroFilled = true;
  for (const dtype of ["f32", "i32"] as const) {
    for (const op of ["sum", "max", ...(dtype === "f32" ? ["avg"] as const : [])] as const) {
      // 1001 elements stage (below the in-place threshold); `big` is reduced in place, whole
      // and as a view that starts 7 elements into its buffer.
      for (const [n, at] of [[1001, 0], [big, 0], [big, 7]]) {
        const shared = await emptyShared([n + at], { dtype, group: world });
        zeroFilled &&= viewOf(shared).every((v) => v === 0);
        const x = at === 0 ? shared : shared.narrow(0, at, n);
        const expected = data(rank, n, dtype, n + at);
        viewOf(x).set(expected);
        await allReduce(x, op, world);
        await allReduce(tensorOf(expected), op, gloo);
        worst[dtype] = Math.max(worst[dtype], diff(viewOf(x), expected));
        compared++;
        x.dispose(); // the view, then the tensor: the part is unmapped at once
        shared.dispose();
      }
    }
  }
  // Gloo has no shared memory: an ordinary zero-filled tensor, which its all-reduce sums.
  const plain = await emptyShared([5], { group: gloo });
  viewOf(plain).fill(1);
  await allReduce(plain, "sum", gloo);
  const plainSum = Array.from(viewOf(plain));
  return { worst, compared, zeroFilled, plainSum };
}

await runWorker(async () => {
  await initProcessGroup({
    backend: mode === "auto" ? "auto" : "gloo",
    timeoutMs: envInt("TEST_TIMEOUT_MS", 20_000),
  });
  const world = worldGroup();
  const big = envInt("BIG", 1_048_583); // just over one 4 MiB staging chunk of f32
  if (mode === "compare") {
    Deno.env.set("DTRAIN_SHM", "0");
    const gloo = await newGroup(world.ranks.slice());
    const shmOut = await series(world, big);
    const glooOut = await series(gloo, big);
    const worst = { f32: 0, i32: 0 };
    for (const [name, x] of shmOut) {
      const kind = x instanceof Float32Array ? "f32" : "i32";
      worst[kind] = Math.max(worst[kind], diff(x, glooOut.get(name)!));
    }
    const backends = [world.backendName, gloo.backendName];
    await destroyProcessGroup();
    return { backends, worst, compared: shmOut.size };
  }
  if (mode === "shared") {
    Deno.env.set("DTRAIN_SHM", "0");
    const gloo = await newGroup(world.ranks.slice());
    const result = { backend: world.backendName, ...await sharedSeries(world, gloo, big) };
    // A shared tensor outlives its group (DDP's gradients stay readable after the job).
    const kept = await emptyShared([big]);
    viewOf(kept).fill(1);
    await allReduce(kept);
    // No rank allocates any more, and each buffer's name went once every rank had mapped it.
    const left = segments();
    await destroyProcessGroup();
    return { ...result, left, keptAfterDestroy: viewOf(kept).every((v) => v === world.size) };
  }
  if (mode === "shared-mismatch") {
    const x = getRank() === 0 ? await emptyShared([big]) : tensorOf(new Float32Array(big));
    if (getRank() !== 0) await emptyShared([big]); // every rank allocates: it is collective
    const errors = [];
    try {
      await allReduce(x);
    } catch (err) {
      errors.push((err as Error).message);
    }
    const one = tensorOf(new Float32Array([1]));
    await allReduce(one);
    await destroyProcessGroup();
    return { errors, after: one.data[0] };
  }
  if (mode === "shared-full") {
    // 2^37 f32 per rank: more than any /dev/shm here holds.
    let error = "";
    try {
      await emptyShared([2 ** 37]);
    } catch (err) {
      error = `${(err as DistError).code}: ${(err as Error).message}`;
    }
    const one = tensorOf(new Float32Array([1]));
    await allReduce(one);
    const left = segments();
    await destroyProcessGroup();
    return { error, after: one.data[0], left };
  }
  if (mode === "shared-dead") {
    if (getRank() === 1) Deno.exit(3);
    try {
      await emptyShared([big]);
      return { error: null };
    } catch (err) {
      return { error: (err as Error).message, left: segments() };
    }
  }
  if (mode === "dump") {
    const out = await series(world, big);
    const rows = Object.fromEntries([...out].map(([k, v]) => [k, Array.from(v)]));
    const rank = getRank();
    await Deno.writeTextFile(
      `${Deno.env.get("OUT_DIR")}/rank${rank}.json`,
      JSON.stringify({ backend: world.backendName, size: getWorldSize(), rows }),
    );
    await destroyProcessGroup();
    return { backend: world.backendName };
  }
  if (mode === "loop" || mode === "shared-loop") {
    // shared-loop: a tensor every rank maps, past the in-place threshold.
    const x = mode === "loop"
      ? tensorOf(new Float32Array(256 * 1024).fill(1))
      : await emptyShared([1 << 20]);
    console.log(JSON.stringify({ backend: world.backendName }));
    for (let i = 0;; i++) {
      await allReduce(x);
      if (i === 20) console.log("looping");
    }
  }
  if (mode === "auto") {
    const block = await world.allocShared(4, "f32");
    block?.free();
    const x = tensorOf(new Float32Array([getRank() + 1]));
    await allReduce(x);
    const result = { backend: world.backendName, shared: block !== null, sum: x.data[0] };
    await destroyProcessGroup();
    return result;
  }
  if (mode === "group") {
    // A subgroup that spans the world's ranks takes the same path as the world.
    const sub = await newGroup([...Array(getWorldSize()).keys()]);
    const result = { backend: sub.backendName, world: world.backendName };
    await destroyProcessGroup();
    return result;
  }
  throw new Error(`unknown MODE ${mode}`);
});
