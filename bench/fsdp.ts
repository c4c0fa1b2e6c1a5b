/**
 * dtrain's worker of the FSDP section of `make bench`: one rank of GPT training with
 * `parallel.fullyShard` (each block, then the root) or DDP, one BLAS thread, AdamW, random tokens.
 * Its twin is bench/fsdp_torch.py. Rank 0 prints one `BENCH_RESULT` line: tokens/s, step time,
 * per-rank bytes of parameters + gradients + AdamW state, the native memory after forward (the
 * activations and the gathered parameters of that moment), peak RSS, and the exposed
 * communication share (and the forward's part of it). `--forward-prefetch=off` turns FSDP's
 * forward prefetch off, to measure what it hides. `--param-dtype=bf16` shards with
 * `mpPolicy: { paramDtype: "bf16" }` (bf16 all-gathers and reduce-scatters, FSDP2's
 * MixedPrecisionPolicy(param_dtype=torch.bfloat16)); FSDP's result then also carries the bytes
 * its all-gathers and reduce-scatters moved per measured step (`lastStats`).
 * @module
 */

import { parseArgs } from "node:util";
import { barrier, destroyProcessGroup, initProcessGroup } from "../src/distributed/mod.ts";
import { AdamW } from "../src/optim/adamw.ts";
import { DistributedDataParallel, fullyShard } from "../src/parallel/mod.ts";
import { tensor } from "../src/tensor/creation.ts";
import { tidyAsync } from "../src/tensor/scope.ts";
import { allocatedBytes } from "../src/tensor/storage.ts";
import { setNumThreads } from "../src/tensor/threads.ts";
import { benchGPT, peakRssBytes, report } from "./workload.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: Object.fromEntries(
    [
      "strategy",
      "vocab",
      "block",
      "n-layer",
      "n-head",
      "n-embd",
      "batch",
      "steps",
      "warmup",
      "forward-prefetch",
      "param-dtype",
    ].map(
      (name) => [name, { type: "string" as const }],
    ),
  ),
});
const int = (name: string) => Number(values[name]);
const [V, T, B] = [int("vocab"), int("block"), int("batch")];

setNumThreads(1);
const group = await initProcessGroup({ backend: "gloo" });
const gpt = benchGPT(int);
const fsdp = values.strategy === "fsdp";
let forward: (x: ReturnType<typeof tensor>, y: ReturnType<typeof tensor>) => ReturnType<
  typeof tensor
>;
let backward: (loss: ReturnType<typeof tensor>) => Promise<void>;
let exposed: () => number;
let forwardComm = () => 0;
let commBytes = () => ({ allGather: 0, reduceScatter: 0 });
const paramDtype = values["param-dtype"] ?? "f32";
if (paramDtype !== "f32" && paramDtype !== "bf16") {
  throw new Error(`bench/fsdp.ts: --param-dtype=${paramDtype} (f32 or bf16)`);
}
if (fsdp) {
  const forwardPrefetch = values["forward-prefetch"] !== "off";
  const mpPolicy = { paramDtype } as const;
  for (const block of gpt.transformer.h.children()) {
    fullyShard(block, { forwardPrefetch, mpPolicy });
  }
  const model = fullyShard(gpt, { mpPolicy });
  forward = (x, y) => model.forward(x, y).loss;
  backward = (loss) => model.backward(loss);
  exposed = () => model.lastStats.forwardCommMs + model.lastStats.exposedCommMs;
  forwardComm = () => model.lastStats.forwardCommMs;
  commBytes = () => ({
    allGather: model.lastStats.allGatherBytes,
    reduceScatter: model.lastStats.reduceScatterBytes,
  });
} else {
  if (paramDtype !== "f32") throw new Error("bench/fsdp.ts: --param-dtype=bf16 is FSDP's only");
  const ddp = await DistributedDataParallel.create(gpt);
  forward = (x, y) => ddp.forward(x, y).loss!;
  backward = (loss) => ddp.backward(loss);
  exposed = () => ddp.lastStats.exposedCommMs;
}
const local = gpt.parameters().reduce((n, p) => n + p.numel(), 0);
const optimizer = new AdamW(gpt.parameters(), { lr: 1e-3 });
let seed = 1 + group.rank;
const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;

let seconds = 0, exposedMs = 0, forwardMs = 0, afterForward = 0, lastLoss = 0;
let allGatherBytes = 0, reduceScatterBytes = 0;
const steps = int("steps"), warmup = int("warmup");
for (let step = 0; step < warmup + steps; step++) {
  const tokens = Int32Array.from({ length: B * (T + 1) }, () => Math.floor(random() * V));
  const start = performance.now();
  lastLoss = await tidyAsync(async () => {
    const x = tensor(tokens.filter((_, i) => i % (T + 1) !== T), [B, T]);
    const y = tensor(tokens.filter((_, i) => i % (T + 1) !== 0), [B, T]);
    const loss = forward(x, y);
    afterForward = Math.max(afterForward, allocatedBytes());
    await backward(loss);
    optimizer.step();
    optimizer.zeroGrad();
    return loss.item();
  });
  if (step >= warmup) {
    seconds += (performance.now() - start) / 1000;
    exposedMs += exposed();
    forwardMs += forwardComm();
    const bytes = commBytes();
    allGatherBytes += bytes.allGather;
    reduceScatterBytes += bytes.reduceScatter;
  }
}
await barrier();
if (group.rank === 0) {
  report({
    framework: "dtrain",
    strategy: values.strategy,
    paramDtype,
    worldSize: group.size,
    tokensPerSecond: (steps * B * T * group.size) / seconds,
    stepMs: (1000 * seconds) / steps,
    exposedCommShare: exposedMs / (1000 * seconds),
    forwardCommShare: forwardMs / (1000 * seconds),
    localParams: local,
    stateBytes: local * 4 * 4,
    allocatedAfterForwardBytes: afterForward,
    peakRssBytes: peakRssBytes(),
    // Per rank and per measured step: each collective's output (gathers) or input (scatters).
    ...(fsdp
      ? {
        allGatherBytesPerStep: allGatherBytes / steps,
        reduceScatterBytesPerStep: reduceScatterBytes / steps,
      }
      : {}),
    loss: lastLoss,
  });
}
await destroyProcessGroup();
