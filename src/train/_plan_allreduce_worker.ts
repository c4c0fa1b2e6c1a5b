/**
 * One rank of the planner's all-reduce probe (plan_machine.ts runs two with the launcher): times
 * 64 KiB and 16 MiB f32 all-reduces over the default backend and has rank 0 write the bandwidth
 * and latency, as JSON, to the file named by its argument.
 * @module
 */

import { allReduce, destroyProcessGroup, initProcessGroup } from "../distributed/mod.ts";
import { zeros } from "../tensor/creation.ts";

/** The fastest of `repeats` all-reduces of `bytes`, in seconds (after one to warm up). */
async function time(bytes: number, repeats: number): Promise<number> {
  const t = zeros([bytes / 4]);
  let min = Infinity;
  for (let i = 0; i <= repeats; i++) {
    const t0 = performance.now();
    await allReduce(t);
    if (i > 0) min = Math.min(min, performance.now() - t0);
  }
  t.dispose();
  return min / 1000;
}

await initProcessGroup({});
const small = 64 << 10, large = 16 << 20;
const latency = await time(small, 20), bulk = await time(large, 5);
if (Deno.env.get("RANK") === "0") {
  const bytesPerSecond = (large - small) / Math.max(bulk - latency, 1e-9);
  await Deno.writeTextFile(
    Deno.args[0],
    JSON.stringify({
      bytesPerSecond,
      latencySeconds: Math.max(latency - small / bytesPerSecond, 0),
    }),
  );
}
await destroyProcessGroup();
