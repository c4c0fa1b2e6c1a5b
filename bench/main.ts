/**
 * `make bench` (`deno task bench`): dtrain against PyTorch on the same machine in the same run.
 *
 * Three sections, each run dtrain / PyTorch alternately (A B, then B A, ...) for `--rounds`
 * rounds in separate processes, reported as medians with their ratios:
 *   single     one epoch of Fashion-MNIST on an MLP 784-512-512-10, batch 64, SGD momentum 0.9,
 *              2 threads: samples/s, achieved GFLOP/s against a 2048³ sgemm peak, time from
 *              process start to the first optimizer step, peak RSS;
 *   ddp        the same epoch split over 2 processes of 1 thread (DDP over Gloo): samples/s and
 *              how much of dtrain's all-reduce time backward hid;
 *   allreduce  f32 all-reduce between 2 processes, 4 KiB to 64 MiB: time and bus bandwidth, from
 *              bench/allreduce.ts and its twin bench/allreduce_torch.py;
 *   gpt        training steps of a GPT (4 layers, 4 heads, width 256, block 128, vocabulary 256,
 *              batch 8, AdamW, fp32, 2 threads) and its causal attention forward + backward alone
 *              against F.scaled_dot_product_attention: tokens/s and peak RSS (bench/gpt.ts,
 *              bench/gpt_torch.py);
 *   fsdp       GPT training with fully_shard (each block, then the root) on 2 processes of 1
 *              thread over Gloo, against PyTorch's FSDP2: tokens/s, the exposed communication
 *              share, and per-rank parameter + gradient + AdamW bytes at 4 ranks against DDP's
 *              (bench/fsdp.ts and bench/fsdp_torch.py).
 * Prints the tables and writes them, with every run's raw numbers, as JSON.
 *
 * Usage: deno run -A --v8-flags=--expose-gc bench/main.ts [--only=single,ddp,allreduce,fsdp]
 *          [--rounds=3] [--json=runs/bench/<time>.json] [--no-torch]
 * The PyTorch interpreter is `DTRAIN_BENCH_PYTHON`, else `python3` from PATH.
 * @module
 */

import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import {
  backgroundBusy,
  benchFileExists,
  type Command,
  denoWorker,
  findTorch,
  freePort,
  lastJsonLine,
  machineInfo,
  pythonWorker,
  type ResultParser,
  type RunResult,
  runWorkers,
} from "./runner.ts";
import {
  argValue,
  BATCH,
  GPT_BENCH,
  LR,
  MOMENTUM,
  NORMALIZE,
  PEAK_N,
  PEAK_REPS,
  SEED,
  SIZES,
} from "./workload.ts";

const SECTIONS = ["single", "ddp", "allreduce", "gpt", "fsdp"] as const;
type Section = typeof SECTIONS[number];
/**
 * dtrain as the job picks (shared memory on one host), dtrain on memory every rank maps
 * (emptyShared; the all-reduce section only), dtrain with DTRAIN_SHM=0, PyTorch.
 */
type Framework = "dtrain" | "shared" | "gloo" | "torch";
type Runs = Record<Framework, RunResult[]>;

const USAGE =
  `usage: make bench ARGS="[--only=single,ddp,allreduce,gpt,fsdp] [--rounds=3] [--json=PATH] [--no-torch]"
  --only      sections to run: single, ddp, allreduce, gpt, fsdp (default all)
  --rounds    dtrain/PyTorch alternations per workload; medians are reported (default 3)
  --json      where to write the results (default runs/bench/<date>.json)
  --no-torch  run dtrain only
env DTRAIN_BENCH_PYTHON: the Python with torch (default: python3 from PATH)`;

interface Options {
  sections: Section[];
  rounds: number;
  json: string;
  torch: boolean;
}

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

/** One way to run a workload on each side (the others absent when not compared). */
type Sides = {
  dtrain: () => Promise<RunResult>;
  shared?: () => Promise<RunResult>;
  gloo?: () => Promise<RunResult>;
  torch?: () => Promise<RunResult>;
};

/** Runs the sides alternately, A B then B A, `rounds` times; logs each run as it ends. */
async function alternate(
  name: string,
  rounds: number,
  sides: Sides,
  headline: (r: Record<string, unknown>) => string,
): Promise<Runs> {
  const runs: Runs = { dtrain: [], shared: [], gloo: [], torch: [] };
  const order = (["dtrain", "shared", "gloo", "torch"] as const).filter((fw) =>
    sides[fw] !== undefined
  );
  for (let round = 0; round < rounds; round++) {
    for (const fw of round % 2 === 0 ? order : [...order].reverse()) {
      const run = await sides[fw]!();
      runs[fw].push(run);
      console.log(
        `  ${name} round ${round + 1}/${rounds} ${fw.padEnd(6)} ${headline(run.result)}` +
          `  (others used ${pct(run.backgroundBusy)} of the CPUs just before)`,
      );
    }
  }
  return runs;
}

/** Runs the same command for each of `world` ranks with the env:// variables (and `env`) set. */
function ranks(
  what: string,
  world: number,
  command: (rank: number, port: number) => Command,
  env: Record<string, string> = {},
  parse?: ResultParser,
) {
  return () => {
    const port = freePort();
    const token = crypto.randomUUID();
    return runWorkers(
      what,
      Array.from({ length: world }, (_, rank) => command(rank, port)),
      (rank) => ({
        ...env,
        RANK: String(rank),
        WORLD_SIZE: String(world),
        LOCAL_RANK: String(rank),
        MASTER_ADDR: "127.0.0.1",
        MASTER_PORT: String(port),
        DTRAIN_TOKEN: token,
      }),
      TIMEOUT_MS,
      parse,
    );
  };
}

/** Runs one process (which may start its own children). */
function single(worker: Command, parse?: ResultParser): () => Promise<RunResult> {
  return () => runWorkers("single", [worker], () => ({}), TIMEOUT_MS, parse);
}

const TIMEOUT_MS = 600_000;

// ---------------------------------------------------------------- statistics and formatting

function median(values: number[]): number {
  const v = values.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (v.length === 0) return NaN;
  return v.length % 2 ? v[(v.length - 1) / 2] : (v[v.length / 2 - 1] + v[v.length / 2]) / 2;
}

/** (max - min) / median of a field over runs: how far apart the rounds were. */
function spread(values: number[]): number {
  const m = median(values);
  return values.length > 1 ? (Math.max(...values) - Math.min(...values)) / m : 0;
}

function field(runs: RunResult[], name: string): number[] {
  return runs.map((r) => r.result[name]).filter((v): v is number => typeof v === "number");
}

function med(runs: RunResult[], name: string): number {
  return median(field(runs, name));
}

/** dtrain/PyTorch of a field in each round (both sides ran back to back), e.g. "1.52 1.61". */
function roundRatios(runs: Runs, name: string): string {
  const d = field(runs.dtrain, name), t = field(runs.torch, name);
  return d.slice(0, t.length).map((x, i) => (x / t[i]).toFixed(2)).join(" ");
}

function pct(x: number): string {
  return Number.isFinite(x) ? `${(x * 100).toFixed(0)}%` : "—";
}

function num(x: number, digits = 0): string {
  return Number.isFinite(x)
    ? x.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits })
    : "—";
}

function ratio(x: number): string {
  return Number.isFinite(x) && x > 0 ? `${x.toFixed(2)}×` : "—";
}

function bytesLabel(n: number): string {
  return n >= 2 ** 20 ? `${n / 2 ** 20} MiB` : `${n / 1024} KiB`;
}

/** A Markdown table with padded columns. */
function table(header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (cells: string[]) =>
    `| ${
      cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join(" | ")
    } |`;
  const rule = `|${
    widths.map((w, i) => (i === 0 ? "-".repeat(w + 2) : `${"-".repeat(w + 1)}:`)).join("|")
  }|`;
  return [line(header), rule, ...rows.map(line)].join("\n");
}

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
    // Shared memory named explicitly (the default on one host, src/dist/select_backend.ts), so the
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

/** The GPT of the FSDP section: 4 blocks of width 128, byte vocabulary, 8 × 64 tokens per rank. */
const GPT_ARGS = [
  "--vocab=256",
  "--block=64",
  "--n-layer=4",
  "--n-head=4",
  "--n-embd=128",
  "--batch=8",
];

async function benchFsdp(options: Options, python: string | null) {
  console.log("\n(d) FSDP: GPT 4x128, 2 processes x 1 thread, 8x64 tokens per rank, AdamW, Gloo");
  const side = (strategy: string, world: number, steps: string[], dtype = "f32") => ({
    dtrain: ranks(
      "fsdp",
      world,
      () =>
        denoWorker("fsdp.ts", [
          `--strategy=${strategy}`,
          `--param-dtype=${dtype}`,
          ...GPT_ARGS,
          ...steps,
        ]),
    ),
    torch: python
      ? ranks("fsdp", world, (rank, port) =>
        pythonWorker(python, "fsdp_torch.py", [
          `--strategy=${strategy}`,
          `--rank=${rank}`,
          `--world-size=${world}`,
          `--port=${port}`,
          `--param-dtype=${dtype}`,
          ...GPT_ARGS,
          ...steps,
        ]))
      : undefined,
  });
  const tokens = (r: Record<string, unknown>) => `${num(r.tokensPerSecond as number)} tokens/s`;
  const speed = ["--steps=20", "--warmup=3"], once = ["--steps=1", "--warmup=0"];
  const runs = await alternate("fsdp", options.rounds, side("fsdp", 2, speed), tokens);
  const bf16 = await alternate("fsdp bf16", options.rounds, side("fsdp", 2, speed, "bf16"), tokens);
  const ddp2 = await alternate("ddp (same GPT)", options.rounds, side("ddp", 2, speed), tokens);
  const memory = await alternate("fsdp, 4 ranks", 1, side("fsdp", 4, once), tokens);
  const ddp4 = await alternate("ddp, 4 ranks", 1, side("ddp", 4, once), tokens);
  const d = (name: string) => med(runs.dtrain, name), t = (name: string) => med(runs.torch, name);
  const fraction = (side: Framework) =>
    med(memory[side], "stateBytes") / med(ddp4[side], "stateBytes");
  const mib = (x: number) => `${num(x / 2 ** 20, 1)} MiB`;
  const rows = [
    [
      "tokens/s (both ranks)",
      num(d("tokensPerSecond")),
      num(t("tokensPerSecond")),
      ratio(d("tokensPerSecond") / t("tokensPerSecond")),
    ],
    ["step time", `${num(d("stepMs"), 1)} ms`, `${num(t("stepMs"), 1)} ms`, ""],
    [
      "DDP tokens/s on the same GPT (2 ranks)",
      num(med(ddp2.dtrain, "tokensPerSecond")),
      num(med(ddp2.torch, "tokensPerSecond")),
      ratio(med(ddp2.dtrain, "tokensPerSecond") / med(ddp2.torch, "tokensPerSecond")),
    ],
    [
      "FSDP tokens/s as a share of own DDP's",
      pct(d("tokensPerSecond") / med(ddp2.dtrain, "tokensPerSecond")),
      pct(t("tokensPerSecond") / med(ddp2.torch, "tokensPerSecond")),
      "",
    ],
    ["exposed communication share of a step", pct(d("exposedCommShare")), "n/a", ""],
    [
      "params + grads + AdamW per rank at 4 ranks, share of DDP's",
      `${mib(med(memory.dtrain, "stateBytes"))} (${pct(fraction("dtrain"))})`,
      `${mib(med(memory.torch, "stateBytes"))} (${pct(fraction("torch"))})`,
      "",
    ],
    ["native memory after forward (2 ranks)", mib(d("allocatedAfterForwardBytes")), "n/a", ""],
    [
      "peak RSS (2 ranks)",
      mib(d("peakRssBytes")),
      mib(t("peakRssBytes")),
      ratio(t("peakRssBytes") / d("peakRssBytes")),
    ],
  ];
  console.log(`\n${table(["(d) FSDP, GPT", "dtrain", "PyTorch", "advantage"], rows)}`);
  console.log(
    `\n${
      table(["(d) FSDP, bf16 gathers", "dtrain", "PyTorch", "advantage"], fsdpBf16Rows(runs, bf16))
    }`,
  );
  return { runs, bf16, ddp2, memory, ddp4 };
}

/**
 * FSDP with `mpPolicy: { paramDtype: "bf16" }` (PyTorch: MixedPrecisionPolicy(param_dtype=
 * bfloat16)) against the f32 runs: tokens/s and the bytes every rank's collectives move a step.
 */
function fsdpBf16Rows(f32: Runs, bf16: Runs): string[][] {
  const tps = "tokensPerSecond";
  const bytes = (runs: RunResult[]) =>
    med(runs, "allGatherBytesPerStep") + med(runs, "reduceScatterBytesPerStep");
  const mib = (x: number) => `${num(x / 2 ** 20, 2)} MiB`;
  return [
    [
      "bf16 tokens/s (both ranks)",
      num(med(bf16.dtrain, tps)),
      num(med(bf16.torch, tps)),
      ratio(med(bf16.dtrain, tps) / med(bf16.torch, tps)),
    ],
    [
      "bf16 step time",
      `${num(med(bf16.dtrain, "stepMs"), 1)} ms`,
      `${num(med(bf16.torch, "stepMs"), 1)} ms`,
      "",
    ],
    ["bf16, dtrain/PyTorch round by round", roundRatios(bf16, tps), "", ""],
    [
      "bf16 tokens/s / f32 tokens/s",
      ratio(med(bf16.dtrain, tps) / med(f32.dtrain, tps)),
      ratio(med(bf16.torch, tps) / med(f32.torch, tps)),
      "",
    ],
    ["f32: all-gather + reduce-scatter bytes per rank per step", mib(bytes(f32.dtrain)), "n/a", ""],
    [
      "bf16: all-gather + reduce-scatter bytes per rank per step",
      mib(bytes(bf16.dtrain)),
      "n/a",
      "",
    ],
    ["bf16 bytes / f32 bytes", pct(bytes(bf16.dtrain) / bytes(f32.dtrain)), "n/a", ""],
    [
      "bf16 exposed communication share of a step",
      pct(med(bf16.dtrain, "exposedCommShare")),
      "n/a",
      "",
    ],
    [
      "bf16 native memory after forward (2 ranks)",
      mib(med(bf16.dtrain, "allocatedAfterForwardBytes")),
      "n/a",
      "",
    ],
    [
      "bf16 peak RSS (2 ranks)",
      mib(med(bf16.dtrain, "peakRssBytes")),
      mib(med(bf16.torch, "peakRssBytes")),
      ratio(med(bf16.torch, "peakRssBytes") / med(bf16.dtrain, "peakRssBytes")),
    ],
  ];
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

/** The CPU's bf16 instruction sets from /proc/cpuinfo (avx512_bf16, amx_bf16), or "none". */
function cpuBf16Flags(): string {
  try {
    const flags = Deno.readTextFileSync("/proc/cpuinfo").match(/^flags\s*:\s*(.+)$/m)?.[1] ?? "";
    const bf16 = flags.split(" ").filter((f) => f.includes("bf16"));
    return bf16.length > 0 ? bf16.join(" ") : "none";
  } catch {
    return "unknown (no /proc/cpuinfo)";
  }
}

/**
 * PyTorch's bf16 autocast step runs fewer steps than the rest: on a CPU without bf16 instructions
 * its bf16 kernels are several times slower than its f32 ones (BENCHMARKS.md, issue 22).
 */
const TORCH_BF16_STEPS = { warmup: 1, steps: 3 };

/**
 * The GPT section: a training step (f32, and bf16 autocast around forward + loss) and attention
 * alone, tokens/s and peak RSS on each side.
 */
async function benchGpt(options: Options, python: string | null, bf16Matmul: string) {
  const g = GPT_BENCH;
  console.log(
    `\n(d) GPT: ${g.layers} layers, ${g.heads} heads, width ${g.width}, block ${g.block}, ` +
      `vocabulary ${g.vocab}, batch ${g.batch}, AdamW, fp32 and bf16 autocast, 2 threads\n` +
      `    bf16 matmul: ${bf16Matmul}; CPU bf16 instructions: ${cpuBf16Flags()}`,
  );
  const shape = (o: Record<string, number> = {}) =>
    Object.entries({ ...g, ...o }).map(([k, v]) => `--${k}=${v}`);
  const side = (mode: string, dtype = "f32") => ({
    dtrain: single(denoWorker("gpt.ts", [`--mode=${mode}`, "--threads=2", `--dtype=${dtype}`])),
    torch: python
      ? single(
        pythonWorker(python, "gpt_torch.py", [
          mode,
          "--threads=2",
          `--dtype=${dtype}`,
          ...shape(dtype === "bf16" ? TORCH_BF16_STEPS : {}),
        ]),
      )
      : undefined,
  });
  const tokens = (r: Record<string, unknown>) => `${num(r.tokensPerSecond as number)} tokens/s`;
  const step = await alternate("gpt step", options.rounds, side("step"), tokens);
  const bf16 = await alternate("gpt step bf16", options.rounds, side("step", "bf16"), tokens);
  const attention = await alternate("attention", options.rounds, side("attention"), tokens);
  const row = (label: string, runs: Runs, name: string, unit: (x: number) => string) => {
    const d = med(runs.dtrain, name), t = med(runs.torch, name);
    return [label, unit(d), unit(t), ratio(name === "tokensPerSecond" ? d / t : t / d)];
  };
  const mib = (x: number) => `${num(x / 2 ** 20)} MiB`;
  const tps = "tokensPerSecond";
  // bf16 over f32 on each side, round by round (round i of each alternation ran minutes apart).
  const overF32 = (fw: Framework) => {
    const b = field(bf16[fw], tps), f = field(step[fw], tps);
    return b.slice(0, f.length).map((x, i) => (x / f[i]).toFixed(2)).join(" ");
  };
  const rows = [
    row("training step, tokens/s", step, tps, (x) => num(x)),
    row("training step, peak RSS", step, "peakRssBytes", mib),
    ["training step, dtrain/PyTorch round by round", roundRatios(step, tps), "", ""],
    row("bf16 autocast step, tokens/s", bf16, tps, (x) => num(x)),
    row("bf16 autocast step, peak RSS", bf16, "peakRssBytes", mib),
    ["bf16 step, dtrain/PyTorch round by round", roundRatios(bf16, tps), "", ""],
    [
      "bf16 step / own f32 step, tokens/s",
      ratio(med(bf16.dtrain, tps) / med(step.dtrain, tps)),
      ratio(med(bf16.torch, tps) / med(step.torch, tps)),
      "",
    ],
    ["bf16 / f32 round by round", overF32("dtrain"), overF32("torch"), ""],
    [
      "bf16 step, loss after the last step",
      num(med(bf16.dtrain, "loss"), 4),
      num(med(bf16.torch, "loss"), 4),
      "",
    ],
    row("attention fwd+bwd, ms", attention, "attentionMs", (x) => num(x, 2)),
    row("attention fwd+bwd, peak RSS", attention, "peakRssBytes", mib),
    ["attention, dtrain/PyTorch round by round", roundRatios(attention, tps), "", ""],
  ];
  console.log(`\n${table(["(d) GPT", "dtrain", "PyTorch", "advantage"], rows)}`);
  if (python) {
    console.log(
      `  (PyTorch's bf16 step: ${TORCH_BF16_STEPS.steps} timed steps after ` +
        `${TORCH_BF16_STEPS.warmup} warm-up, against ${g.steps} after ${g.warmup} elsewhere)`,
    );
  }
  return { step, bf16, attention };
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
  results.loadavgAfter = Deno.loadavg();
  await Deno.mkdir(dirname(resolve(options.json)), { recursive: true });
  await Deno.writeTextFile(options.json, JSON.stringify(results, null, 2) + "\n");
  console.log(`\nresults written to ${options.json}`);
}
