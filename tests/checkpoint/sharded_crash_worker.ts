/**
 * Worker for sharded_crash_test.ts: trains one FSDP step of the MLP problem, saves checkpoint 1
 * to DIR and prints what it holds, trains a second step and saves again; rank CRASH_RANK SIGKILLs
 * itself at CRASH_POINT inside that second save (hooks on the file calls it makes):
 * - "shard-write": half-way through writing its safetensors file (still the temporary one);
 * - "pieces": its piece list renamed into place, before it writes its safetensors file;
 * - "index-rename": (rank 0) the new index written and synced, just before its rename;
 * - "cleanup": (rank 0) the new index renamed into place, before generation 1 is removed.
 * It prints "crash: POINT" first; the test then kills the other ranks, as a launcher would.
 * @module
 */

import { digests } from "./_digests.ts";
import { saveSharded } from "../../src/checkpoint/mod.ts";
import { getRank, initProcessGroup } from "../../src/distributed/mod.ts";
import { fullStateDict, fullyShard } from "../../src/parallel/mod.ts";
import { tidyAsync } from "../../src/tensor/scope.ts";
import {
  batchLoss,
  buildModel,
  buildOptimizer,
  innerModules,
  ROWS,
  stateValues,
} from "../parallel/workers/fsdp_problem.ts";

const dir = Deno.env.get("DIR")!, point = Deno.env.get("CRASH_POINT")!;
const crashRank = Number(Deno.env.get("CRASH_RANK"));

function crash(): never {
  console.log(`crash: ${point}`);
  Deno.kill(Deno.pid, "SIGKILL");
  throw new Error("unreachable: SIGKILL did not end the process");
}

/** Arms the hook for CRASH_POINT on this rank. */
function arm(rank: number): void {
  if (rank !== crashRank) return;
  const { openSync, renameSync, removeSync } = Deno;
  const writeSync = Deno.FsFile.prototype.writeSync;
  if (point === "shard-write") {
    const shardFiles = new WeakSet<Deno.FsFile>();
    Object.assign(Deno, {
      openSync(path: string | URL, options?: Deno.OpenOptions) {
        const file = openSync(path, options);
        if (/\/\.rank-\d+\.safetensors\.[^/]+\.tmp$/.test(String(path))) shardFiles.add(file);
        return file;
      },
    });
    Deno.FsFile.prototype.writeSync = function (bytes) {
      if (!shardFiles.has(this)) return writeSync.call(this, bytes);
      writeSync.call(this, bytes.subarray(0, Math.max(1, bytes.length >> 1)));
      crash();
    };
  } else if (point === "pieces" || point === "index-rename") {
    const target = point === "pieces" ? /\/rank-\d+\.json$/ : /\/index\.json$/;
    Object.assign(Deno, {
      renameSync(from: string | URL, to: string | URL) {
        if (!target.test(String(to))) return renameSync(from, to);
        if (point === "pieces") renameSync(from, to);
        crash();
      },
    });
  } else if (point === "cleanup") {
    Object.assign(Deno, {
      removeSync(path: string | URL, options?: Deno.RemoveOptions) {
        if (String(path).endsWith("/gen-1")) crash(); // the previous generation
        return removeSync(path, options);
      },
    });
  } else {
    throw new Error(`unknown CRASH_POINT "${point}"`);
  }
}

await initProcessGroup({ backend: "gloo", timeoutMs: 20_000 });
const rank = getRank();
const built = buildModel("mlp");
for (const m of innerModules(built)) fullyShard(m);
const model = fullyShard(built);
const optimizer = buildOptimizer(model.parameters());
const step = (index: number) =>
  tidyAsync(async () => {
    await model.backward(batchLoss("mlp", model, index, rank * ROWS, (rank + 1) * ROWS));
    optimizer.step();
    optimizer.zeroGrad();
  });

await step(0);
await saveSharded(dir, { model, optimizer, extra: { step: 1 } });
const saved = stateValues(await fullStateDict(model));
await step(1);
const next = stateValues(await fullStateDict(model));
if (rank === 0) console.log(JSON.stringify({ saved, next, digests: await digests(dir) }));
arm(rank);
await saveSharded(dir, { model, optimizer, extra: { step: 2 } });
console.error(`rank ${rank}: the second save finished; CRASH_POINT ${point} never fired`);
Deno.exit(1);
