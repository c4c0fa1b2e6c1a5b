/**
 * Worker for faults_test.ts. MODE picks the scenario:
 * - "loop": all-reduce forever (printing "looping" once warmed up) until something fails; with
 *   SHARED=1 on a tensor from emptyShared;
 * - "mismatch": a series of collectives where rank 1 disagrees with the others, then a valid one;
 * - "hang": rank HANG_RANK skips the collective the others call;
 * - "job": a short, valid job (used while the store is under attack);
 * - "hold": join, print "joined", wait until the file GO_FILE exists, then create a subgroup
 *   (new store connections, native ones included) and all-reduce in it.
 * @module
 */

import {
  allReduce,
  broadcast,
  destroyProcessGroup,
  emptyShared,
  getRank,
  initProcessGroup,
  newGroup,
} from "../../../src/distributed/mod.ts";
import { envInt, runWorker, tensorOf } from "../../_harness/worker.ts";

const mode = Deno.env.get("MODE");
const timeoutMs = envInt("TEST_TIMEOUT_MS", 5000);

async function settle(work: PromiseLike<void>): Promise<string> {
  try {
    await work;
    return "ok";
  } catch (err) {
    return (err as Error).message;
  }
}

await runWorker(async () => {
  await initProcessGroup({ timeoutMs });
  const rank = getRank();
  if (mode === "loop") {
    // SHARED=1: a tensor every rank maps, big enough to be reduced in place over shared memory.
    const x = Deno.env.get("SHARED") === "1"
      ? await emptyShared([1 << 20])
      : tensorOf(new Float32Array(16 * 1024).fill(1));
    for (let i = 0;; i++) {
      await allReduce(x);
      if (i === 20) console.log("looping");
    }
  }
  if (mode === "mismatch") {
    const odd = rank === 1;
    const f32 = (n: number) => tensorOf(new Float32Array(n).fill(1));
    const errors = [
      await settle(allReduce(f32(odd ? 2048 : 1024))),
      await settle(allReduce(f32(64), odd ? "max" : "sum")),
      await settle(odd ? broadcast(f32(64), 0) : allReduce(f32(64))),
      await settle(allReduce(odd ? tensorOf(new Int32Array(64)) : f32(64))),
      await settle(broadcast(f32(8), odd ? 1 : 0)),
    ];
    const x = f32(100);
    await allReduce(x);
    await destroyProcessGroup();
    return { errors, after: x.data[0] };
  }
  if (mode === "hang") {
    if (rank === envInt("HANG_RANK", -1)) {
      await new Promise((r) => setTimeout(r, timeoutMs + 2000));
      return {};
    }
    await allReduce(tensorOf(new Float32Array(8)));
  }
  if (mode === "job") {
    const x = tensorOf(new Float32Array(1000));
    for (let i = 0; i < 200; i++) {
      x.data.fill(1);
      await allReduce(x);
    }
    await destroyProcessGroup();
    return { sum: x.data[0] };
  }
  if (mode === "hold") {
    console.log("joined");
    const go = Deno.env.get("GO_FILE")!;
    while (!await Deno.stat(go).then(() => true, () => false)) {
      await new Promise((r) => setTimeout(r, 20));
    }
    const group = await newGroup([0, 1]);
    const x = tensorOf(new Float32Array(1000).fill(1));
    await allReduce(x, "sum", group);
    await destroyProcessGroup();
    return { sum: x.data[0] };
  }
  throw new Error(`unknown MODE ${mode}`);
});
