/**
 * Worker for ledger_diagnosis_test.ts; each call the test looks for is marked with a `site:`
 * comment, which the test turns into the exact `file:line` the diagnosis must print. MODE:
 * - "skip": a barrier, then rank SKIP_RANK waits in a barrier of a group with rank 0 instead of
 *   the all-reduce the others call;
 * - "order": rank 0 calls allReduce then broadcast, rank 1 broadcast then allReduce;
 * - "loop": all-reduce forever (printing "looping" once warmed up), for a SIGSTOP or SIGKILL;
 * - "straggle": rank SLOW_RANK sleeps SLEEP_MS before each of 12 all-reduces, then every rank
 *   reports the stragglers (rank 0 prints the warning line).
 * @module
 */

import {
  allReduce,
  barrier,
  broadcast,
  getRank,
  initProcessGroup,
  newGroup,
  worldGroup,
} from "../../../src/distributed/mod.ts";
import { warnStragglers } from "../../../src/distributed/stragglers.ts";
import { envInt, runWorker, tensorOf } from "../../_harness/worker.ts";

const mode = Deno.env.get("MODE");
const timeoutMs = envInt("TEST_TIMEOUT_MS", 5000);
const x = tensorOf(new Float32Array(1024).fill(1));

await runWorker(async () => {
  await initProcessGroup({ timeoutMs });
  const rank = getRank();
  if (mode === "skip") {
    await barrier(); // site: barrier
    const skipper = envInt("SKIP_RANK", -1);
    const elsewhere = await newGroup([0, skipper]);
    if (rank === skipper) {
      console.log("skipping");
      await barrier(elsewhere); // site: elsewhere
      return {};
    }
    await allReduce(x); // site: skipped
  }
  if (mode === "order") {
    if (rank === 0) {
      await allReduce(x).then(() => {}, () => {}); // site: first on 0
      await broadcast(x, 0).then(() => {}, () => {});
    } else {
      await broadcast(x, 0).then(() => {}, () => {}); // site: first on 1
      await allReduce(x).then(() => {}, () => {});
    }
    return {};
  }
  if (mode === "straggle") {
    const sleep = rank === envInt("SLOW_RANK", -1) ? envInt("SLEEP_MS", 0) : 0;
    for (let i = 0; i < 12; i++) {
      await new Promise((r) => setTimeout(r, sleep));
      await allReduce(x); // site: straggled
    }
    const report = await warnStragglers(1, 12, worldGroup(), console.log);
    return { report };
  }
  if (mode === "loop") {
    for (let i = 0;; i++) {
      await allReduce(x); // site: loop
      if (i === 20) console.log(`looping ${Deno.pid}`);
    }
  }
  return {};
});
