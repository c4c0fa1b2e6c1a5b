/**
 * The GPT sections of `make bench` (bench/main.ts): (d) GPT, one process, a training step in f32
 * and under bf16 autocast and attention alone (bench/gpt.ts, bench/gpt_torch.py), and (d) FSDP,
 * GPT with fullyShard on 2 ranks in f32 and with bf16 gathers, DDP on the same GPT, and the
 * per-rank state at 4 ranks (bench/fsdp.ts, bench/fsdp_torch.py).
 * @module
 */

import {
  alternate,
  field,
  type Framework,
  med,
  num,
  type Options,
  pct,
  ranks,
  ratio,
  roundRatios,
  type Runs,
  single,
  table,
} from "./bench_lib.ts";
import { denoWorker, pythonWorker, type RunResult } from "./runner.ts";
import { GPT_BENCH } from "./workload.ts";

/** The GPT of the FSDP section: 4 blocks of width 128, byte vocabulary, 8 × 64 tokens per rank. */
export const GPT_ARGS = [
  "--vocab=256",
  "--block=64",
  "--n-layer=4",
  "--n-head=4",
  "--n-embd=128",
  "--batch=8",
];

/** The FSDP section (see the module doc). */
export async function benchFsdp(options: Options, python: string | null) {
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
export async function benchGpt(options: Options, python: string | null, bf16Matmul: string) {
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
      "loss after the last step, f32 / bf16",
      `${num(med(step.dtrain, "loss"), 4)} / ${num(med(bf16.dtrain, "loss"), 4)}`,
      `${num(med(step.torch, "loss"), 4)} / ${num(med(bf16.torch, "loss"), 4)}`,
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
