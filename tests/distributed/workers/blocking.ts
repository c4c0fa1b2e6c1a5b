/**
 * Worker for blocking_test.ts: the blocking collectives (`allReduceBlocking`, `allGatherBlocking`,
 * `reduceScatterBlocking`) on this rank's tensors, on "cpu" over the group's host backend (shared
 * memory, Gloo under DTRAIN_SHM=0, shm+gloo across fake hosts) or, with DEVICE=emu, on
 * `emu:<rank>` over the emu backend. MODE picks the scenario:
 * - "compare": each blocking collective next to its async counterpart on the same inputs (f32 and
 *   bf16; sum, avg, max), both results reported; then a blocking call issued while an async one is
 *   in flight (its error, or its result where the backend orders it), and the uneven calls refused;
 * - "kill": one blocking all-reduce, "ready" printed, then rank VICTIM waits to be killed while
 *   the others call a blocking all-reduce, whose error they report.
 * @module
 */

import {
  getRank,
  getWorldSize,
  initProcessGroup,
  worldGroup,
} from "../../../src/distributed/mod.ts";
import { DistError } from "../../../src/distributed/errors.ts";
import { tensor } from "../../../src/tensor/creation.ts";
import type { Tensor } from "../../../src/tensor/tensor.ts";
import { envInt, runWorker } from "../../_harness/worker.ts";
import { BLOCKING_LENGTHS, BLOCKING_OPS, blockingInput } from "./_blocking.ts";

const mode = Deno.env.get("MODE");
const onEmu = Deno.env.get("DEVICE") === "emu";

/** The message and code of what `call` throws, or "ok". */
function errorOf(call: () => void): { message: string; code?: string } | "ok" {
  try {
    call();
    return "ok";
  } catch (err) {
    return { message: (err as Error).message, code: err instanceof DistError ? err.code : "" };
  }
}

await runWorker(async () => {
  await initProcessGroup({
    backend: onEmu ? "emu" : undefined,
    timeoutMs: envInt("TIMEOUT_MS", 20_000),
  });
  const group = worldGroup();
  const rank = getRank(), size = getWorldSize();
  const device = onEmu ? `emu:${rank}` : "cpu";
  const make = (values: number[], dtype: "f32" | "bf16"): Tensor => {
    const t = tensor(Float32Array.from(values), [values.length], { device });
    return dtype === "f32" ? t : t.to(dtype);
  };
  const values = (t: Tensor): number[] => Array.from(t.to("f32").toArray() as Float32Array);
  const filled = (n: number, v: number) => make(new Array(n).fill(v), "f32");

  if (mode === "kill") {
    const victim = envInt("VICTIM", 1);
    const x = filled(1024, 1);
    group.allReduceBlocking(x);
    console.log("ready");
    if (rank === victim) await new Promise(() => setInterval(() => {}, 1000));
    const started = performance.now();
    const failure = errorOf(() => group.allReduceBlocking(x));
    return { backend: group.backendName, failure, afterMs: performance.now() - started };
  }

  const out: Record<string, unknown> = { backend: group.backendName, queued: false };
  const pairs: Record<string, [number[], number[]]> = {};
  for (const dtype of ["f32", "bf16"] as const) {
    for (const [salt, op] of BLOCKING_OPS.entries()) {
      for (const n of BLOCKING_LENGTHS) {
        const a = make(blockingInput(rank, n, salt), dtype);
        const b = make(blockingInput(rank, n, salt), dtype);
        await group.allReduce(a, op);
        group.allReduceBlocking(b, op);
        pairs[`allReduce/${dtype}/${op}/${n}`] = [values(a), values(b)];
        const x = make(blockingInput(rank, size * n, salt + 10), dtype);
        const ya = make(new Array(n).fill(0), dtype), yb = make(new Array(n).fill(0), dtype);
        await group.reduceScatter(ya, x, op);
        group.reduceScatterBlocking(yb, x, op);
        pairs[`reduceScatter/${dtype}/${op}/${n}`] = [values(ya), values(yb)];
      }
    }
    for (const n of BLOCKING_LENGTHS) {
      const x = make(blockingInput(rank, n, 20), dtype);
      const ga = make(new Array(size * n).fill(0), dtype);
      const gb = make(new Array(size * n).fill(0), dtype);
      await group.allGather(ga, x);
      group.allGatherBlocking(gb, x);
      pairs[`allGather/${dtype}/${n}`] = [values(ga), values(gb)];
    }
  }
  out.pairs = pairs;

  // A blocking call behind an async one in flight: refused, or run after it. Each async call
  // changes what the blocking one reads (a sum makes every element size·(size+1)/2), so the
  // result tells which ran first.
  const behind: Record<string, unknown> = {};
  const n = 4;
  const x = filled(n, rank + 1);
  const inFlight = group.allReduce(x, "sum");
  behind.allReduce = errorOf(() => group.allReduceBlocking(x, "max"));
  await inFlight;
  behind.allReduceValue = values(x);
  const y = filled(size * n, rank + 1), chunk = filled(n, 0);
  const before = group.allReduce(y, "sum");
  behind.reduceScatter = errorOf(() => group.reduceScatterBlocking(chunk, y, "sum"));
  await before;
  behind.reduceScatterValue = values(chunk);
  const z = filled(n, rank + 1), gathered = filled(size * n, 0);
  const first = group.allReduce(z, "sum");
  behind.allGather = errorOf(() => group.allGatherBlocking(gathered, z));
  await first;
  behind.allGatherValue = values(gathered);
  out.behind = behind;

  // Uneven calls, refused before anything is sent.
  out.uneven = {
    reduceScatter: errorOf(() =>
      group.reduceScatterBlocking(filled(3, 0), filled(3 * size + 1, 1))
    ),
    allGather: errorOf(() => group.allGatherBlocking(filled(2 * size - 1, 0), filled(2, 1))),
    dtypes: errorOf(() => group.reduceScatterBlocking(make([0], "bf16"), filled(size, 1))),
  };
  // Still usable afterwards.
  const last = filled(3, rank);
  group.allReduceBlocking(last, "sum");
  out.after = values(last);
  return out;
});
