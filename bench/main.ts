/**
 * `make bench` (`deno task bench`): dtrain against PyTorch on the same machine in the same run.
 *
 * Eight sections, each run dtrain / PyTorch alternately (A B, then B A, ...) for `--rounds`
 * rounds in separate processes, reported as medians with their ratios:
 *   single     one epoch of Fashion-MNIST on an MLP 784-512-512-10, batch 64, SGD momentum 0.9,
 *              2 threads: samples/s, achieved GFLOP/s against a 2048³ sgemm peak, time from
 *              process start to the first optimizer step, peak RSS;
 *   ddp        the same epoch split over 2 processes of 1 thread (DDP over Gloo): samples/s and
 *              how much of dtrain's all-reduce time backward hid;
 *   allreduce  f32 all-reduce between 2 processes, 4 KiB to 64 MiB: time and bus bandwidth, from
 *              bench/allreduce.ts and its twin bench/allreduce_torch.py;
 *   gpt        training steps of a GPT (4 layers, 4 heads, width 256, block 128, vocabulary 256,
 *              batch 8, AdamW, 2 threads) in fp32 and with forward + loss under bf16 autocast
 *              (against torch.autocast("cpu", bfloat16) and against dtrain's own fp32 step), and
 *              its causal attention forward + backward alone against
 *              F.scaled_dot_product_attention: tokens/s and peak RSS (bench/gpt.ts,
 *              bench/gpt_torch.py);
 *   fsdp       GPT training with fully_shard (each block, then the root) on 2 processes of 1
 *              thread, against PyTorch's FSDP2 over Gloo: tokens/s, the exposed communication
 *              share, per-rank parameter + gradient + AdamW bytes at 4 ranks against DDP's, and
 *              the same training with bf16 all-gathers and reduce-scatters (mpPolicy, against
 *              MixedPrecisionPolicy(param_dtype=bfloat16)) with the bytes they move per step
 *              (bench/fsdp.ts and bench/fsdp_torch.py);
 *   ac         activation checkpointing of every GPT block (block size 256) against none, and
 *              against PyTorch's checkpoint_wrapper: activation memory and step time
 *              (bench/activation_checkpoint.ts and bench/activation_checkpoint_torch.py);
 *   nd         GPT training at TP 2, DDP 2, HSDP 2×2 and TP 2 × FSDP 2 (1 thread per rank, Gloo)
 *              against parallelize_module and fully_shard on the same meshes: tokens/s and
 *              per-rank memory of TP 2 against DDP 2 (bench/nd_section.ts, bench/nd_worker.ts,
 *              bench/nd_torch.py);
 *   pipeline   GPT training with GPipe, 1F1B and Interleaved1F1B on 4 and 2 ranks against
 *              torch.distributed.pipelining: bubble against theory, tokens/s, per-rank memory
 *              (bench/pipeline_section.ts, bench/pipeline_worker.ts, bench/pipeline_torch.py).
 * The gpt and fsdp sections are in bench/sections_gpt.ts; what all sections share, in
 * bench/bench_lib.ts.
 * Prints the tables and writes them, with every run's raw numbers, as JSON.
 *
 * Usage: deno run -A --v8-flags=--expose-gc bench/main.ts [--only=single,ddp,allreduce,gpt,fsdp,ac,nd,pipeline]
 *          [--rounds=3] [--json=runs/bench/<time>.json] [--no-torch]
 * The PyTorch interpreter is `DTRAIN_BENCH_PYTHON`, else `python3` from PATH.
 * @module
 */

import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import {
  alternate,
  bytesLabel,
  field,
  med,
  median,
  num,
  type Options,
  pct,
  ranks,
  ratio,
  roundRatios,
  type Runs,
  type Section,
  SECTIONS,
  single,
  spread,
  table,
} from "./bench_lib.ts";
import {
  backgroundBusy,
  benchFileExists,
  denoWorker,
  findTorch,
  freePort,
  lastJsonLine,
  machineInfo,
  pythonWorker,
  type RunResult,
} from "./runner.ts";
import { benchFsdp, benchGpt } from "./sections_gpt.ts";
import { benchActivationCheckpoint } from "./activation_checkpoint.ts";
import { benchNd } from "./nd_section.ts";
import { benchPipeline } from "./pipeline_section.ts";
import {
  argValue,
  BATCH,
  LR,
  MOMENTUM,
  NORMALIZE,
  PEAK_N,
  PEAK_REPS,
  SEED,
  SIZES,
} from "./workload.ts";

const USAGE =
  `usage: make bench ARGS="[--only=single,ddp,allreduce,gpt,fsdp,ac,nd,pipeline] [--rounds=3] [--json=PATH] [--no-torch]"
  --only      sections to run: single, ddp, allreduce, gpt, fsdp, ac, nd, pipeline (default all)
  --rounds    dtrain/PyTorch alternations per workload; medians are reported (default 3)
  --json      where to write the results (default runs/bench/<date>.json)
  --no-torch  run dtrain only
env DTRAIN_BENCH_PYTHON: the Python with torch (default: python3 from PATH)`;

function parseOptions(args: string[]): Options {
  if (args.includes("--help") || args.includes("-h")) {
    console.log(USAGE);
    Deno.exit(0);
  }
  const known = ["--only=", "--rounds=", "--json=", "--no-torch"];
  const unknown = args.find((a) => !known.some((k) => a === k || a.startsWith(k)));
  if (unknown !== undefined) throw new Error(`bench: unknown argument ${unknown}\n${USAGE}`);
  const sections = argValue(args, "only", SECTIONS.join(",")).split(",") as Section[];
  const bad = sections.find((s) => !SECTIONS.includes(s));
  if (bad !== undefined) throw new Error(`bench: unknown section "${bad}" in --only`);
  const rounds = Number(argValue(args, "rounds", "3"));
  if (!Number.isInteger(rounds) || rounds < 1) throw new Error(`bench: --rounds=${rounds}`);
  const stamp = new Date().toISOString().replace(/[:.]/g, "-");
  const json = argValue(
    args,
    "json",
    fileURLToPath(new URL(`../runs/bench/${stamp}.json`, import.meta.url)),
  );
  return { sections, rounds, json, torch: !args.includes("--no-torch") };
}

/** The workload's numbers for the PyTorch side's command line. */
const TORCH_WORKLOAD = [
  `--sizes=${SIZES.join(",")}`,
  `--batch=${BATCH}`,
  `--lr=${LR}`,
  `--momentum=${MOMENTUM}`,
  `--mean=${NORMALIZE.mean}`,
  `--std=${NORMALIZE.std}`,
  `--seed=${SEED}`,
];

/** How far apart the rounds were: the spread, the best round, and each round's ratio. */
function noiseRows(runs: Runs): string[][] {
  const d = field(runs.dtrain, "samplesPerSecond"), t = field(runs.torch, "samplesPerSecond");
  const best = (v: number[]) => (v.length ? Math.max(...v) : NaN);
  return [
    ["spread of samples/s over rounds ((max-min)/median)", pct(spread(d)), pct(spread(t)), ""],
    ["samples/s of the best round", num(best(d)), num(best(t)), ratio(best(d) / best(t))],
    ["dtrain/PyTorch samples/s round by round", roundRatios(runs, "samplesPerSecond"), "", ""],
  ];
}

// ---------------------------------------------------------------- the sections

async function benchSingle(options: Options, python: string | null) {
  console.log("\n(a) single process: 1 epoch, MLP 784-512-512-10, batch 64, 2 threads");
  const train = await alternate("train", options.rounds, {
    dtrain: single(denoWorker("single.ts", ["--mode=train", "--threads=2"])),
    torch: python
      ? single(pythonWorker(python, "torch_side.py", ["single", "--threads=2", ...TORCH_WORKLOAD]))
      : undefined,
  }, (r) => `${num(r.samplesPerSecond as number)} samples/s`);
  const peak = await alternate("sgemm peak", options.rounds, {
    dtrain: single(denoWorker("single.ts", ["--mode=peak", "--threads=2"])),
    torch: python
      ? single(
        pythonWorker(python, "torch_side.py", [
          "peak",
          "--threads=2",
          `--n=${PEAK_N}`,
          `--reps=${PEAK_REPS}`,
        ]),
      )
      : undefined,
  }, (r) => `${num(r.gflops as number, 1)} GFLOP/s`);

  const d = (name: string) => med(train.dtrain, name), t = (name: string) => med(train.torch, name);
  const peakD = med(peak.dtrain, "gflops"), peakT = med(peak.torch, "gflops");
  const mib = (x: number) => `${num(x / 2 ** 20)} MiB`;
  const sec = (x: number) => `${num(x / 1000, 2)} s`;
  const rows = [
    [
      "samples/s",
      num(d("samplesPerSecond")),
      num(t("samplesPerSecond")),
      ratio(d("samplesPerSecond") / t("samplesPerSecond")),
    ],
    [
      "achieved matmul GFLOP/s (share of own sgemm peak)",
      `${num(d("gflops"), 1)} (${pct(d("gflops") / peakD)})`,
      `${num(t("gflops"), 1)} (${pct(t("gflops") / peakT)})`,
      ratio(d("gflops") / t("gflops")),
    ],
    [`sgemm peak, ${PEAK_N}³, GFLOP/s`, num(peakD, 1), num(peakT, 1), ratio(peakD / peakT)],
    [
      "time to first step (from process start)",
      sec(d("firstStepMs")),
      sec(t("firstStepMs")),
      ratio(t("firstStepMs") / d("firstStepMs")),
    ],
    [
      "peak RSS",
      mib(d("peakRssBytes")),
      mib(t("peakRssBytes")),
      ratio(t("peakRssBytes") / d("peakRssBytes")),
    ],
    ["mean loss of the last 100 steps", num(d("lastLoss"), 3), num(t("lastLoss"), 3), ""],
    ...noiseRows(train),
  ];
  console.log(`\n${table(["(a) single process", "dtrain", "PyTorch", "advantage"], rows)}`);
  return { train, peak };
}

async function benchDdp(options: Options, python: string | null) {
  console.log(
    "\n(b) DDP: 2 processes x 1 thread, batch 64 per rank, 1 epoch; dtrain over shared memory " +
      "and over Gloo (DTRAIN_SHM=0), PyTorch over Gloo",
  );
  const runs = await alternate("ddp", options.rounds, {
    // Shared memory named explicitly (the default on one host, src/distributed/select_backend.ts), so the
    // column measures it whatever the caller's DTRAIN_SHM; the Gloo column turns it off.
    dtrain: ranks("ddp", 2, () => denoWorker("ddp.ts"), { DTRAIN_SHM: "1" }),
    gloo: ranks("ddp", 2, () => denoWorker("ddp.ts"), { DTRAIN_SHM: "0" }),
    torch: python
      ? ranks("ddp", 2, (rank, port) =>
        pythonWorker(python, "torch_side.py", [
          "ddp",
          "--threads=1",
          `--rank=${rank}`,
          "--world-size=2",
          `--port=${port}`,
          ...TORCH_WORKLOAD,
        ]))
      : undefined,
  }, (r) => `${num(r.samplesPerSecond as number)} samples/s`);
  const d = (name: string) => med(runs.dtrain, name), t = (name: string) => med(runs.torch, name);
  const g = (name: string) => med(runs.gloo, name);
  const ms = (x: number) => `${num(x, 2)} ms`;
  const rows = [
    [
      "samples/s (both ranks)",
      num(d("samplesPerSecond")),
      num(g("samplesPerSecond")),
      num(t("samplesPerSecond")),
      ratio(d("samplesPerSecond") / t("samplesPerSecond")),
    ],
    [
      "all-reduce time hidden behind backward",
      pct(d("hiddenFraction")),
      pct(g("hiddenFraction")),
      "n/a",
      "",
    ],
    ["step time (epoch time / steps)", ms(d("stepMs")), ms(g("stepMs")), "n/a", ""],
    ["backward per step", ms(d("backwardMs")), ms(g("backwardMs")), "n/a", ""],
    [
      "all-reduce span per step (first issue to last done)",
      ms(d("commSpanMs")),
      ms(g("commSpanMs")),
      "n/a",
      "",
    ],
    ["exposed all-reduce wait per step", ms(d("exposedCommMs")), ms(g("exposedCommMs")), "n/a", ""],
    [
      "exposed wait as a share of the step",
      pct(d("exposedCommMs") / d("stepMs")),
      pct(g("exposedCommMs") / g("stepMs")),
      "n/a",
      "",
    ],
    [
      "mean loss over the epoch",
      num(d("meanLoss"), 3),
      num(g("meanLoss"), 3),
      num(t("meanLoss"), 3),
      "",
    ],
    ...noiseRows(runs).map(([label, a, b, c]) => [label, a, "", b, c]),
  ];
  console.log(
    `\n${table(["(b) DDP, 2 ranks", "dtrain shm", "dtrain Gloo", "PyTorch", "shm/PyTorch"], rows)}`,
  );
  return runs;
}

/**
 * The all-reduce section runs bench/allreduce.ts (its worker mode, DTRAIN_BENCH_WORKER=1) and
 * bench/allreduce_torch.py --json, which share sizes, iteration counts and the timing rule
 * (the fastest of 5 trials of back-to-back all-reduces); this adds the alternation and medians.
 */
async function benchAllReduce(options: Options, python: string | null) {
  console.log(
    "\n(c) all-reduce: f32 sum, 2 processes; dtrain over shared memory and over Gloo " +
      "(loopback TCP), PyTorch over Gloo",
  );
  const missing = ["allreduce.ts", "allreduce_torch.py"].filter((f) => !benchFileExists(f));
  if (missing.length > 0) {
    console.log(`  SKIPPED: bench/${missing.join(" and bench/")} not found`);
    return null;
  }
  type Row = { bytes: number; seconds: number };
  const rowsOf = (r: RunResult) => r.result.rows as Row[];
  const largest = (r: Record<string, unknown>) => {
    const last = (r.rows as Row[]).at(-1)!;
    return `${num(last.bytes / last.seconds / 1e9, 2)} GB/s busbw at ${bytesLabel(last.bytes)}`;
  };
  const runs = await alternate("allreduce", options.rounds, {
    dtrain: ranks(
      "allreduce",
      2,
      () => denoWorker("allreduce.ts"),
      { DTRAIN_BENCH_WORKER: "1", DTRAIN_SHM: "1" },
      lastJsonLine,
    ),
    // The tensor in memory every rank maps (dist.emptyShared), reduced in place, as DDP's buckets.
    shared: ranks(
      "allreduce",
      2,
      () => denoWorker("allreduce.ts"),
      { DTRAIN_BENCH_WORKER: "1", DTRAIN_SHM: "1", DTRAIN_BENCH_SHARED: "1" },
      lastJsonLine,
    ),
    gloo: ranks(
      "allreduce",
      2,
      () => denoWorker("allreduce.ts"),
      { DTRAIN_BENCH_WORKER: "1", DTRAIN_SHM: "0" },
      lastJsonLine,
    ),
    torch: python
      ? () =>
        single(
          pythonWorker(python, "allreduce_torch.py", ["--json", "--port", String(freePort())]),
          lastJsonLine,
        )()
      : undefined,
  }, largest);
  const world = 2;
  const sizes = rowsOf(runs.dtrain[0]).map((r) => r.bytes);
  const seconds = (fw: RunResult[], bytes: number) =>
    median(fw.map((r) => rowsOf(r).find((x) => x.bytes === bytes)?.seconds ?? NaN));
  const busbw = (bytes: number, s: number) => (2 * (world - 1) / world) * bytes / s / 1e9;
  const rows = sizes.map((bytes) => {
    const sd = seconds(runs.dtrain, bytes), st = seconds(runs.torch, bytes);
    const ss = seconds(runs.shared, bytes), sg = seconds(runs.gloo, bytes);
    return [
      bytesLabel(bytes),
      num(sd * 1e6, 1),
      num(busbw(bytes, sd), 3),
      num(ss * 1e6, 1),
      num(busbw(bytes, ss), 3),
      num(sg * 1e6, 1),
      num(st * 1e6, 1),
      num(busbw(bytes, st), 3),
      ratio(st / sd),
      ratio(st / ss),
    ];
  });
  console.log(`\n${
    table([
      "(c) size",
      "shm µs",
      "shm GB/s",
      "shm in place µs",
      "in place GB/s",
      "Gloo µs",
      "PyTorch µs",
      "PyTorch GB/s",
      "shm/PyTorch",
      "in place/PyTorch",
    ], rows)
  }`);
  return runs;
}

// ---------------------------------------------------------------- main

if (import.meta.main) {
  const options = parseOptions(Deno.args);
  const machine = machineInfo();
  const torch = options.torch ? await findTorch() : { python: "", error: "--no-torch was given" };
  const python = "version" in torch ? torch.python : null;
  console.log(
    `dtrain bench, ${new Date().toISOString()}\nmachine: ${machine.cpu}, ${machine.logicalCpus} ` +
      `logical CPUs, ${machine.memoryGiB} GiB, OpenBLAS core ${machine.blasCore}; load average ${
        (machine.loadavg as number[]).map((x) => x.toFixed(2)).join(" ")
      }; others use ${pct(await backgroundBusy(1000))} of the CPUs now`,
  );
  console.log(`bf16 matmul: ${machine.bf16Matmul}`);
  console.log(
    python
      ? `PyTorch side: torch ${"version" in torch ? torch.version : ""} (${torch.python})`
      : `PyTorch side SKIPPED: ${"error" in torch ? torch.error : ""} (python: ${
        torch.python || "none"
      }); set DTRAIN_BENCH_PYTHON to a Python with torch to compare`,
  );
  const results: Record<string, unknown> = {
    date: new Date().toISOString(),
    machine,
    torch,
    rounds: options.rounds,
  };
  if (options.sections.includes("single")) results.single = await benchSingle(options, python);
  if (options.sections.includes("ddp")) results.ddp = await benchDdp(options, python);
  if (options.sections.includes("allreduce")) {
    results.allreduce = await benchAllReduce(options, python);
  }
  if (options.sections.includes("gpt")) {
    results.gpt = await benchGpt(options, python, String(machine.bf16Matmul));
  }
  if (options.sections.includes("fsdp")) results.fsdp = await benchFsdp(options, python);
  if (options.sections.includes("ac")) {
    results.ac = await benchActivationCheckpoint(options, python);
  }
  if (options.sections.includes("nd")) results.nd = await benchNd(options, python);
  if (options.sections.includes("pipeline")) {
    results.pipeline = await benchPipeline(options, python);
  }
  results.loadavgAfter = Deno.loadavg();
  await Deno.mkdir(dirname(resolve(options.json)), { recursive: true });
  await Deno.writeTextFile(options.json, JSON.stringify(results, null, 2) + "\n");
  console.log(`\nresults written to ${options.json}`);
}
