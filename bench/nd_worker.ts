/**
 * dtrain's worker of the N-D parallelism section of `make bench` (bench/nd_section.ts): one rank
 * of GPT training (AdamW, one BLAS thread, random tokens, Gloo) laid out by `--layout`:
 *   one      one process, no wrapper (the activation-memory reference);
 *   tp       `parallel.parallelizeGPT` over all ranks (TP 2: each rank reads the whole batch);
 *   ddp      DistributedDataParallel (each rank its `--batch / world` rows of the batch);
 *   hsdp     `fullyShard` (each block, then the root) on a (dp_replicate, dp_shard) mesh;
 *   tp_fsdp  a (dp, tp) mesh: `parallelizeGPT` on tp, then `fullyShard` on dp (torchtitan's order).
 * `--batch` is the batch of one data-parallel replica (tp: of the job; ddp: of both ranks
 * together, so that TP 2 and DDP 2 train the same batch). Its twin is bench/nd_torch.py.
 *
 * One untimed step after the warm-up measures memory: `allocatedBytes()` after collections,
 * before forward (the model state: parameters, AdamW moments), after forward, after backward and
 * after the optimizer step; the largest is `stepBytes`. Then the timed steps (median step time).
 * Rank 0 prints one `BENCH_RESULT` line.
 * @module
 */

import { parseArgs } from "node:util";
import {
  barrier,
  destroyProcessGroup,
  type DeviceMesh,
  initDeviceMesh,
  initProcessGroup,
} from "../src/distributed/mod.ts";
import { AdamW } from "../src/optim/adamw.ts";
import { DistributedDataParallel, fullyShard, parallelizeGPT } from "../src/parallel/mod.ts";
import { tensor } from "../src/tensor/creation.ts";
import { tidyAsync } from "../src/tensor/scope.ts";
import { allocatedBytes } from "../src/tensor/storage.ts";
import type { Tensor } from "../src/tensor/tensor.ts";
import { setNumThreads } from "../src/tensor/threads.ts";
import { benchGPT, peakRssBytes, report } from "./workload.ts";

const NUMBERS = ["vocab", "block", "n-layer", "n-head", "n-embd", "batch", "steps", "warmup"];
const { values } = parseArgs({
  args: Deno.args,
  options: Object.fromEntries(
    ["layout", ...NUMBERS].map((name) => [name, { type: "string" as const }]),
  ),
});
const int = (name: string) => {
  const n = Number(values[name]);
  if (!Number.isInteger(n) || n < 0) {
    throw new Error(`bench/nd_worker.ts: --${name}=${values[name]}`);
  }
  return n;
};
const layout = values.layout ?? "";
if (!["one", "tp", "ddp", "hsdp", "tp_fsdp"].includes(layout)) {
  throw new Error(`bench/nd_worker.ts: --layout=${layout} (one, tp, ddp, hsdp or tp_fsdp)`);
}
const [V, T] = [int("vocab"), int("block")];

setNumThreads(1);
const group = await initProcessGroup({ backend: "gloo" });
const gpt = benchGPT(int);

/** Where this rank sits in the data-parallel dimension, and how it runs forward and backward. */
interface Layout {
  dpRank: number;
  dpSize: number;
  rows: number;
  forward: (x: Tensor, y: Tensor) => Tensor;
  backward: (loss: Tensor) => Promise<void> | void;
}

async function lay(): Promise<Layout> {
  const world = group.size;
  const shardBlocks = (mesh: DeviceMesh) => {
    for (const block of gpt.transformer.h.children()) fullyShard(block, { mesh });
    return fullyShard(gpt, { mesh });
  };
  if (layout === "one" || layout === "tp") {
    if (layout === "tp") {
      parallelizeGPT(gpt, await initDeviceMesh("cpu", [world], { meshDimNames: ["tp"] }));
    }
    return {
      dpRank: 0,
      dpSize: 1,
      rows: int("batch"),
      forward: (x, y) => gpt.forward(x, y).loss!,
      backward: (loss) => loss.backward(),
    };
  }
  if (layout === "ddp") {
    const ddp = await DistributedDataParallel.create(gpt);
    return {
      dpRank: group.rank,
      dpSize: world,
      rows: int("batch") / world,
      forward: (x, y) => ddp.forward(x, y).loss!,
      backward: (loss) => ddp.backward(loss),
    };
  }
  if (layout === "hsdp") {
    const mesh = await initDeviceMesh("cpu", [2, world / 2], {
      meshDimNames: ["dp_replicate", "dp_shard"],
    });
    const model = shardBlocks(mesh);
    return {
      dpRank: group.rank,
      dpSize: world,
      rows: int("batch"),
      forward: (x, y) => model.forward(x, y).loss!,
      backward: (loss) => model.backward(loss),
    };
  }
  const mesh = await initDeviceMesh("cpu", [world / 2, 2], { meshDimNames: ["dp", "tp"] });
  parallelizeGPT(gpt, mesh.get("tp"));
  const model = shardBlocks(mesh.get("dp"));
  return {
    dpRank: mesh.getCoordinate()[0],
    dpSize: world / 2,
    rows: int("batch"),
    forward: (x, y) => model.forward(x, y).loss!,
    backward: (loss) => model.backward(loss),
  };
}

const { dpRank, dpSize, rows, forward, backward } = await lay();
if (!Number.isInteger(rows)) throw new Error(`bench/nd_worker.ts: --batch does not split`);
const optimizer = new AdamW(gpt.parameters(), { lr: 1e-3 });
// The ranks of one data-parallel replica (the TP ranks) read the same tokens.
let seed = 1 + dpRank;
const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
const gc = (globalThis as { gc?: () => void }).gc;
if (gc === undefined) throw new Error("bench/nd_worker.ts: run with --v8-flags=--expose-gc");

/** One event-loop turn: finalizers of collected tensors run on one (src/tensor/storage.ts). */
const turn = () => new Promise((resolve) => setTimeout(resolve, 0));

/**
 * One training step; with `memory`, the allocator's bytes after each phase, after collections
 * with event-loop turns between (so tensors already dropped are not counted).
 */
function step(memory?: number[]): Promise<number> {
  const note = async () => {
    if (memory === undefined) return;
    for (let i = 0; i < 2; i++) {
      gc!();
      await turn();
    }
    memory.push(allocatedBytes());
  };
  const tokens = Int32Array.from({ length: rows * (T + 1) }, () => Math.floor(random() * V));
  return tidyAsync(async () => {
    const x = tensor(tokens.filter((_, i) => i % (T + 1) !== T), [rows, T], { dtype: "i32" });
    const y = tensor(tokens.filter((_, i) => i % (T + 1) !== 0), [rows, T], { dtype: "i32" });
    await note();
    const loss = forward(x, y);
    await note();
    await backward(loss);
    await note();
    optimizer.step();
    await note();
    optimizer.zeroGrad();
    return loss.item();
  });
}

const steps = int("steps"), warmup = int("warmup");
for (let i = 0; i < warmup; i++) await step();
const memory: number[] = [];
await step(memory);
await barrier();
const times: number[] = [];
let loss = 0;
for (let i = 0; i < steps; i++) {
  const start = performance.now();
  loss = await step();
  times.push(performance.now() - start);
}
await barrier();
times.sort((a, b) => a - b);
const stepMs = times[times.length >> 1];
if (group.rank === 0) {
  report({
    framework: "dtrain",
    layout,
    worldSize: group.size,
    tokensPerSecond: (dpSize * rows * T) / (stepMs / 1000),
    stepMs,
    stepBytes: Math.max(...memory),
    memoryByPhase: memory,
    peakRssBytes: peakRssBytes(),
    loss,
  });
}
await destroyProcessGroup();
