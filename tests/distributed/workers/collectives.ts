/**
 * Worker for collectives_test.ts: runs every collective, op, dtype and length on this rank's
 * inputs from _data.ts and reports the outputs.
 * @module
 */

import {
  allGather,
  allReduce,
  barrier,
  broadcast,
  destroyProcessGroup,
  getRank,
  getWorldSize,
  initProcessGroup,
  newGroup,
  reduceScatter,
} from "../../../src/distributed/mod.ts";
import { runWorker, tensorOf } from "../../_harness/worker.ts";
import {
  ALL_REDUCE_LENGTHS,
  input,
  key,
  LARGE_LENGTH,
  LARGE_OPS,
  OPS,
  PAST_INLINE_LENGTH,
  REDUCE_SCATTER_CHUNKS,
  SMALL_LENGTH,
} from "./_data.ts";

await runWorker(async () => {
  await initProcessGroup({ timeoutMs: 20_000 });
  const rank = getRank();
  const size = getWorldSize();
  const out: Record<string, number[]> = {};
  const dtypes = ["f32", "i32"] as const;

  for (const dtype of dtypes) {
    for (const [salt, op] of OPS[dtype].entries()) {
      const lengths = LARGE_OPS.includes(op)
        ? [...ALL_REDUCE_LENGTHS, LARGE_LENGTH]
        : ALL_REDUCE_LENGTHS;
      for (const n of lengths) {
        const x = input(rank, n, dtype, salt, op);
        await allReduce(tensorOf(x), op);
        out[key("allReduce", op, dtype, n)] = Array.from(x);
      }
      for (const chunk of REDUCE_SCATTER_CHUNKS) {
        const x = input(rank, size * chunk, dtype, salt, op);
        const y = dtype === "f32" ? new Float32Array(chunk) : new Int32Array(chunk);
        await reduceScatter(tensorOf(y), tensorOf(x), op);
        out[key("reduceScatter", op, dtype, chunk)] = Array.from(y);
      }
    }
    for (let root = 0; root < size; root++) {
      const x = input(rank, SMALL_LENGTH, dtype, 100 + root);
      await broadcast(tensorOf(x), root);
      out[key("broadcast", root, dtype)] = Array.from(x);
    }
    const mine = input(rank, SMALL_LENGTH, dtype, 200);
    const flat = tensorOf(
      dtype === "f32" ? new Float32Array(size * SMALL_LENGTH) : new Int32Array(size * SMALL_LENGTH),
    );
    await allGather(flat, tensorOf(mine));
    out[key("allGather", "flat", dtype)] = Array.from(flat.data);
    const list = Array.from({ length: size }, () => tensorOf(mine.slice().fill(0)));
    await allGather(list, tensorOf(mine));
    out[key("allGather", "list", dtype)] = list.flatMap((t) => Array.from(t.data));
  }

  // Past the inline limit, the payload moves in a second phase.
  const big = PAST_INLINE_LENGTH;
  const last = size - 1;
  const b = input(rank, big, "f32", 400);
  await broadcast(tensorOf(b), last);
  out[key("large", "broadcast")] = Array.from(b);
  const gathered = new Float32Array(size * big);
  await allGather(tensorOf(gathered), tensorOf(input(rank, big, "f32", 500)));
  out[key("large", "allGather")] = Array.from(gathered);
  const shard = new Int32Array(big);
  await reduceScatter(tensorOf(shard), tensorOf(input(rank, size * big, "i32", 600)));
  out[key("large", "reduceScatter")] = Array.from(shard);

  // Several collectives in flight at once still run in issue order on every rank.
  const inflight = Array.from({ length: 8 }, (_, j) => input(rank, 1000 + j, "f32", j));
  await Promise.all(inflight.map((x) => allReduce(tensorOf(x)).wait()));
  inflight.forEach((x, j) => (out[key("inflight", j)] = Array.from(x)));

  await barrier();

  if (size >= 3) {
    const members = [size - 1, 0];
    const group = await newGroup(members);
    if (group.rank >= 0) {
      const x = input(rank, 9, "i32", 300);
      await allReduce(tensorOf(x), "sum", group);
      out[key("group", "allReduce")] = Array.from(x);
    }
  }

  await destroyProcessGroup();
  return { rank, results: out };
});
