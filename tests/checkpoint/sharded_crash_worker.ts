/**
 * Worker for sharded_crash_test.ts: trains one FSDP step of the MLP problem, saves checkpoint 1
 * to DIR and prints what it holds, trains a second step and saves again; rank CRASH_RANK SIGKILLs
 * itself at CRASH_POINT inside that second save (hooks on the file calls it makes, see
 * _crash_hooks.ts), printing "crash: POINT" first; the test then kills the other ranks. With
 * ASYNC=1 the saves are asynchronous and the hooks go on the background writer's thread.
 * @module
 */

import { arm } from "./_crash_hooks.ts";
import { digests } from "./_digests.ts";
import { saveSharded } from "../../src/checkpoint/mod.ts";
import { setWriterHooks } from "../../src/checkpoint/_background_write.ts";
import { getRank, initProcessGroup } from "../../src/distributed/mod.ts";
import { fullStateDict } from "../../src/parallel/mod.ts";
import { stateValues } from "../parallel/workers/fsdp_problem.ts";
import { shardedMlp } from "./_sharded_mlp.ts";

const dir = Deno.env.get("DIR")!, point = Deno.env.get("CRASH_POINT")!;
const crashRank = Number(Deno.env.get("CRASH_RANK"));
// ASYNC=1: both saves write in the background, the hooks go on the background writer, and the
// second save overlaps a training step.
const background = Deno.env.get("ASYNC") === "1";

await initProcessGroup({ backend: "gloo", timeoutMs: 20_000 });
const rank = getRank();
const { model, optimizer, step } = shardedMlp(rank);

await step(0);
if (background) {
  await (await saveSharded(dir, { model, optimizer, extra: { step: 1 }, async: true })).done;
} else await saveSharded(dir, { model, optimizer, extra: { step: 1 } });
const saved = stateValues(await fullStateDict(model));
await step(1);
const next = stateValues(await fullStateDict(model));
if (rank === 0) console.log(JSON.stringify({ saved, next, digests: await digests(dir) }));
if (rank === crashRank && background) {
  setWriterHooks(new URL("./_writer_crash_hooks.ts", import.meta.url).href);
} else if (rank === crashRank) arm(point);
if (background) {
  const pending = await saveSharded(dir, { model, optimizer, extra: { step: 2 }, async: true });
  await step(2); // training goes on while the writer works (and is killed)
  await pending.done;
} else await saveSharded(dir, { model, optimizer, extra: { step: 2 } });
console.error(`rank ${rank}: the second save finished; CRASH_POINT ${point} never fired`);
Deno.exit(1);
