/**
 * The N-D parallelism section of `make bench` (bench/main.ts, `--only=nd`): GPT training on the
 * meshes of issue 24, dtrain (bench/nd_worker.ts) against PyTorch 2.13 (bench/nd_torch.py) in the
 * same run, alternately, one thread per rank, Gloo on both sides:
 *   one process the whole batch in one process, no wrapper (the memory reference);
 *   TP 2        2 ranks, `parallelizeGPT` against `parallelize_module` with the same plan;
 *   DDP 2       2 ranks on the same batch (the memory comparison's baseline);
 *   HSDP 2×2    4 ranks, `fullyShard` on a (dp_replicate, dp_shard) mesh against `fully_shard`;
 *   TP 2×FSDP 2 4 ranks, TP on the tp dimension, then FSDP on dp, on both sides.
 * The GPT is the FSDP section's (4 blocks, width 128, 4 heads, block 64, byte vocabulary);
 * 8 sequences per data-parallel replica. Reported: tokens/s (median step), and rank 0's
 * memory: the allocator's bytes (dtrain's `allocatedBytes()`, PyTorch's malloc'd bytes over those
 * before the model) before forward (the model state), after forward (its excess: activations),
 * the largest of the samples around one step, and peak RSS.
 * @module
 */

import {
  alternate,
  med,
  median,
  num,
  type Options,
  ranks,
  ratio,
  roundRatios,
  type Runs,
  table,
} from "./bench_lib.ts";
import { denoWorker, pythonWorker, type RunResult } from "./runner.ts";
import { GPT_ARGS } from "./sections_gpt.ts";

/**
 * The FSDP section's GPT and its 8 sequences of 64 tokens, here per data-parallel replica (TP 2
 * and DDP 2 both train 8 per step); 2 warm-up steps, 8 timed.
 */
const ARGS = [...GPT_ARGS, "--steps=8", "--warmup=2"];

/** The layouts, their world sizes and labels. */
const LAYOUTS = [
  { layout: "one", world: 1, label: "one process" },
  { layout: "tp", world: 2, label: "TP 2" },
  { layout: "ddp", world: 2, label: "DDP 2" },
  { layout: "hsdp", world: 4, label: "HSDP 2×2" },
  { layout: "tp_fsdp", world: 4, label: "TP 2 × FSDP 2" },
] as const;

function sides(layout: string, world: number, python: string | null) {
  const args = [`--layout=${layout}`, ...ARGS];
  return {
    dtrain: ranks(`nd ${layout}`, world, () => denoWorker("nd_worker.ts", args)),
    torch: python
      ? ranks(`nd ${layout}`, world, (rank, port) =>
        pythonWorker(python, "nd_torch.py", [
          ...args,
          `--rank=${rank}`,
          `--world-size=${world}`,
          `--port=${port}`,
        ]))
      : undefined,
  };
}

const mib = (x: number) => `${num(x / 2 ** 20, 1)} MiB`;
/** The median over runs of the allocator's bytes at sample `phase` (0: before forward). */
const phase = (runs: RunResult[], i: number) =>
  median(runs.map((r) => (r.result.memoryByPhase as number[])[i]));
/** What forward leaves allocated: the bytes after it over those before. */
const activations = (runs: RunResult[]) => phase(runs, 1) - phase(runs, 0);

function memoryRows(one: Runs, tp: Runs, ddp: Runs): string[][] {
  const rows: string[][] = [];
  const three = (label: string, value: (runs: RunResult[]) => number) => {
    for (const [name, runs] of [["one process", one], ["TP 2", tp], ["DDP 2", ddp]] as const) {
      const d = value(runs.dtrain), t = value(runs.torch);
      rows.push([`${label}, ${name}`, mib(d), mib(t), ratio(d / t)]);
    }
    const over = (
      a: Runs,
      b: Runs,
    ) => [ratio(value(a.dtrain) / value(b.dtrain)), ratio(value(a.torch) / value(b.torch))];
    rows.push([`${label}, TP 2 / DDP 2`, ...over(tp, ddp), ""]);
  };
  three("step peak (allocator)", (runs) => med(runs, "stepBytes"));
  three("model state before forward", (runs) => phase(runs, 0));
  three("activations (after forward − before)", activations);
  rows.push([
    "activations, TP 2 / one process",
    ratio(activations(tp.dtrain) / activations(one.dtrain)),
    ratio(activations(tp.torch) / activations(one.torch)),
    "",
  ]);
  three("peak RSS", (runs) => med(runs, "peakRssBytes"));
  return rows;
}

/** The section: each layout dtrain / PyTorch alternately, `options.rounds` times. */
export async function benchNd(options: Options, python: string | null) {
  console.log(
    `\n(g) N-D parallelism: GPT 4x128, block 64, 8 sequences per data-parallel replica, ` +
      "AdamW, 1 thread per rank, Gloo on both sides (4 ranks oversubscribe 2 cores)",
  );
  const tokens = (r: Record<string, unknown>) =>
    `${num(r.tokensPerSecond as number)} tokens/s, step peak ${mib(r.stepBytes as number)}`;
  const runs: Record<string, Runs> = {};
  for (const { layout, world, label } of LAYOUTS) {
    runs[layout] = await alternate(label, options.rounds, sides(layout, world, python), tokens);
  }
  const tps = "tokensPerSecond";
  const speed = LAYOUTS.map(({ layout, label }) => {
    const d = med(runs[layout].dtrain, tps), t = med(runs[layout].torch, tps);
    return [`${label}, tokens/s`, num(d), num(t), ratio(d / t), roundRatios(runs[layout], tps)];
  });
  console.log(
    `\n${table(["(g) N-D parallelism", "dtrain", "PyTorch", "dtrain/PyTorch", "by round"], speed)}`,
  );
  const memory = memoryRows(runs.one, runs.tp, runs.ddp);
  console.log(`\n${table(["(g) memory per rank", "dtrain", "PyTorch", "dtrain/PyTorch"], memory)}`);
  const steps = LAYOUTS.map(({ layout, label }) => [
    `${label}, step`,
    `${num(med(runs[layout].dtrain, "stepMs"), 1)} ms`,
    `${num(med(runs[layout].torch, "stepMs"), 1)} ms`,
    `${num(med(runs[layout].dtrain, "loss"), 3)} / ${num(med(runs[layout].torch, "loss"), 3)}`,
  ]);
  console.log(
    `\n${table(["(g) step time", "dtrain", "PyTorch", "last loss, dtrain / PyTorch"], steps)}`,
  );
  return runs;
}
