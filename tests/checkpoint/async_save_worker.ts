/**
 * Worker for async_save_test.ts: trains FSDP steps of the MLP problem on 2 ranks with asynchronous
 * saves to DIR, changing the model while each is written, and returns what each save must
 * hold and what loading it gave:
 * - save 1 (extra step 1), then a training step overlapping its write, then a fresh sharded model
 *   loads it without awaiting it first;
 * - saves 2 and 3 issued back to back (the third waits for the second), then a step;
 * - save 4, whose write fails on rank 1 (FAIL_RANK; a hook of _crash_hooks.ts), and save 5.
 * @module
 */

import { loadSharded, saveSharded } from "../../src/checkpoint/mod.ts";
import { setWriterHooks } from "../../src/checkpoint/_background_write.ts";
import { destroyProcessGroup, getRank, initProcessGroup } from "../../src/distributed/mod.ts";
import { fullStateDict } from "../../src/parallel/mod.ts";
import { runWorker } from "../_harness/worker.ts";
import { stateValues } from "../parallel/workers/fsdp_problem.ts";
import { shardedMlp } from "./_sharded_mlp.ts";

const dir = Deno.env.get("DIR")!;
await initProcessGroup({ backend: "gloo", timeoutMs: 20_000 });
const rank = getRank();

const sharded = () => shardedMlp(rank);

await runWorker(async () => {
  try {
    const { model, optimizer, step } = sharded();

    await step(0);
    const first = await saveSharded(dir, { model, optimizer, extra: { step: 1 }, async: true });
    const saved1 = stateValues(await fullStateDict(model));
    await step(1); // changes every parameter while the first save may still be writing
    // Not awaited: the load blocks until this rank's save is committed (it is the first one, so
    // a load that did not wait would find no checkpoint at all).
    const fresh = sharded();
    const extra1 = loadSharded(dir, fresh);
    await first.done;
    const loaded1 = stateValues(await fullStateDict(fresh.model));

    const second = await saveSharded(dir, { model, optimizer, extra: { step: 2 }, async: true });
    const third = await saveSharded(dir, { model, optimizer, extra: { step: 3 }, async: true });
    await step(2);
    await third.done;
    await second.done; // already settled: the third waited for it
    const generations = [first.generation, second.generation, third.generation];

    const failRank = Number(Deno.env.get("FAIL_RANK"));
    if (rank === failRank) {
      setWriterHooks(new URL("./_writer_crash_hooks.ts", import.meta.url).href);
    }
    const fourth = await saveSharded(dir, { model, optimizer, extra: { step: 4 }, async: true });
    const failure = await fourth.done.then(() => "committed", (error) => error.message);
    setWriterHooks(null);
    const extraAfterFailure = loadSharded(dir, sharded());
    const fifth = await saveSharded(dir, { model, optimizer, extra: { step: 5 }, async: true });
    await fifth.done;
    const saved5 = stateValues(await fullStateDict(model));
    generations.push(fourth.generation, fifth.generation);
    return { saved1, loaded1, extra1, saved5, failure, extraAfterFailure, generations };
  } finally {
    await destroyProcessGroup();
  }
});
