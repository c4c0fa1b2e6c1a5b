/**
 * Worker for half_collectives_test.ts: every collective on bf16 and f16 tensors, on "cpu" over the
 * group's host backend (shared memory, or Gloo under DTRAIN_SHM=0) or, with DEVICE=emu, on
 * `emu:<rank>` over the emu backend; reports every output as f32 values (exact: both types
 * widen to f32 exactly).
 * @module
 */

import {
  allGather,
  allReduce,
  broadcast,
  destroyProcessGroup,
  getRank,
  getWorldSize,
  initProcessGroup,
  reduceScatter,
  worldGroup,
} from "../../../src/distributed/mod.ts";
import { tensor } from "../../../src/tensor/creation.ts";
import type { Tensor } from "../../../src/tensor/tensor.ts";
import { runWorker } from "../../_harness/worker.ts";
import {
  firstDifference,
  type Half,
  HALF_CHUNKS,
  HALF_LARGE,
  HALF_LARGE_OPS,
  HALF_LENGTHS,
  HALF_OPS,
  HALF_SMALL,
  halfInput,
  halfReduce,
} from "./_half.ts";

const onEmu = Deno.env.get("DEVICE") === "emu";

await runWorker(async () => {
  await initProcessGroup({ backend: onEmu ? "emu" : undefined, timeoutMs: 20_000 });
  const rank = getRank(), size = getWorldSize();
  const device = onEmu ? `emu:${rank}` : "cpu";
  const make = (values: number[], dtype: Half): Tensor =>
    tensor(Float32Array.from(values), [values.length], { device }).to(dtype);
  const values = (t: Tensor): number[] => Array.from(t.to("f32").toArray() as Float32Array);
  const out: Record<string, number[]> = {};
  const every = (f: (r: number) => number[]) => Array.from({ length: size }, (_, r) => f(r));
  /** The first wrong element of a HALF_LARGE result, against the hand computation (-1: none). */
  const large = (t: Tensor, want: number[]) => [firstDifference(values(t), want)];
  for (const dtype of ["bf16", "f16"] as const) {
    for (const [salt, op] of HALF_OPS.entries()) {
      for (const n of HALF_LENGTHS) {
        const x = make(halfInput(rank, n, salt), dtype);
        await allReduce(x, op);
        out[`allReduce/${op}/${dtype}/${n}`] = values(x);
      }
      for (const chunk of HALF_CHUNKS) {
        const x = make(halfInput(rank, size * chunk, salt), dtype);
        const y = make(new Array(chunk).fill(0), dtype);
        await reduceScatter(y, x, op);
        out[`reduceScatter/${op}/${dtype}/${chunk}`] = values(y);
      }
      if (!HALF_LARGE_OPS.includes(op)) continue;
      const n = HALF_LARGE;
      const x = make(halfInput(rank, n, salt, true), dtype);
      await allReduce(x, op);
      const sum = halfReduce(every((r) => halfInput(r, n, salt, true)), op, dtype);
      out[`allReduce/${op}/${dtype}/large`] = large(x, sum);
      const whole = make(halfInput(rank, size * n, salt, true), dtype);
      const y = make(new Array(n).fill(0), dtype);
      await reduceScatter(y, whole, op);
      const full = halfReduce(every((r) => halfInput(r, size * n, salt, true)), op, dtype);
      out[`reduceScatter/${op}/${dtype}/large`] = large(y, full.slice(rank * n, (rank + 1) * n));
    }
    for (let root = 0; root < size; root++) {
      const x = make(halfInput(rank, HALF_SMALL, 100 + root), dtype);
      await broadcast(x, root);
      out[`broadcast/${root}/${dtype}`] = values(x);
    }
    for (const n of [HALF_SMALL, HALF_LARGE]) {
      const report = (form: string, t: Tensor) => {
        const want = every((r) => halfInput(r, n, 200)).flat();
        out[`allGather/${form}/${dtype}/${n}`] = n === HALF_SMALL ? values(t) : large(t, want);
      };
      const mine = make(halfInput(rank, n, 200), dtype);
      const flat = make(new Array(size * n).fill(0), dtype);
      await allGather(flat, mine);
      report("flat", flat);
      const list = Array.from({ length: size }, () => make(new Array(n).fill(0), dtype));
      await allGather(list, mine);
      const joined = tensor(Float32Array.from(list.flatMap(values)));
      report("list", joined);
      const blocking = make(new Array(size * n).fill(0), dtype);
      worldGroup().allGatherBlocking(blocking, mine);
      report("blocking", blocking);
      if (worldGroup().canStartAllGather) {
        const started = make(new Array(size * n).fill(0), dtype);
        worldGroup().allGatherStart(started, mine).waitBlocking();
        report("started", started);
      }
    }
  }
  const backend = worldGroup().backendName;
  await destroyProcessGroup();
  return { backend, results: out };
});
