/**
 * The hooked train job of tests/train/workers/train.ts (all its hooks work), which can also hold
 * every rank before a given step until a file exists, so that a test can start another node
 * while a round is surely running:
 *
 * - DTRAIN_TEST_HOLD=A:S:FILE[,A:S:FILE...]: in round A (DTRAIN_RESTART_COUNT), before global
 *   step S (counted from 0 over the run, resumed steps included), each rank prints "held before
 *   step S" and waits until FILE exists.
 * @module
 */

import { Trainer } from "../../../src/train/trainer.ts";

const holds = (Deno.env.get("DTRAIN_TEST_HOLD") ?? "").split(",").filter((h) => h).map((h) => {
  const [attempt, step, ...file] = h.split(":");
  return { attempt, step: Number(step), file: file.join(":") };
});
const mine = holds.filter((h) => h.attempt === Deno.env.get("DTRAIN_RESTART_COUNT"));
if (mine.length > 0) {
  const exists = (path: string) => Deno.stat(path).then(() => true, () => false);
  const runBatch = Trainer.prototype.runBatch;
  Trainer.prototype.runBatch = async function (x, y) {
    for (const hold of mine.filter((h) => h.step === this.step)) {
      console.log(`held before step ${hold.step}`);
      while (!await exists(hold.file)) await new Promise((r) => setTimeout(r, 20));
    }
    return runBatch.call(this, x, y);
  };
}

await import("../../train/workers/train.ts");
