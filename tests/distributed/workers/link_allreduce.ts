/**
 * Worker for tests/distributed/throttled_link_test.ts: one rank per host of a throttled link.
 * Joins the group at env MASTER (rank 0's address; rank 0 hosts the store on port 29500), then
 * sums each rank's `rank + 1` in a small tensor ROUNDS times, timing each, and once in a 4 MiB
 * one. Prints `{ ok, backend, smallMs: [...], bigMs, wrong }`, where `wrong` counts elements that
 * are not 3 (1 + 2).
 * @module
 */

import {
  allReduce,
  destroyProcessGroup,
  initProcessGroup,
  worldGroup,
} from "../../../src/distributed/mod.ts";
import { envInt, runWorker, tensorOf } from "../../_harness/worker.ts";

await runWorker(async () => {
  const rank = envInt("RANK", -1);
  await initProcessGroup({
    backend: "gloo",
    initMethod: `tcp://${Deno.env.get("MASTER")}:29500`,
    rank,
    worldSize: 2,
    timeoutMs: 30_000,
  });
  let wrong = 0;
  const check = (data: Float32Array) => {
    for (const x of data) if (x !== 3) wrong++;
  };
  const smallMs: number[] = [];
  for (let round = 0; round < envInt("ROUNDS", 10); round++) {
    const data = new Float32Array(16).fill(rank + 1);
    const start = performance.now();
    await allReduce(tensorOf(data), "sum");
    smallMs.push(performance.now() - start);
    check(data);
  }
  const big = new Float32Array(1 << 20).fill(rank + 1);
  const start = performance.now();
  await allReduce(tensorOf(big), "sum");
  const bigMs = performance.now() - start;
  check(big);
  const backend = worldGroup().backendName;
  await destroyProcessGroup();
  return { backend, smallMs, bigMs, wrong };
});
