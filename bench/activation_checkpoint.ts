/**
 * The activation-checkpointing section of `make bench` (bench/main.ts), and its dtrain worker
 * (`--worker`): the benchmark GPT's shape at block size 256 and width 64 (4 layers, 4 heads,
 * vocabulary 256, batch 4, AdamW, fp32, 1 thread: PyTorch's two OpenMP threads spin against each
 * other on a loaded machine, 10x slower), with every block checkpointed
 * (`parallel.applyActivationCheckpointing(model, { mode: "full" })`) and without, against
 * PyTorch's `checkpoint_wrapper` on each block (bench/activation_checkpoint_torch.py) in the same
 * run. Activation memory is what one forward leaves allocated for backward (dtrain's
 * `allocatedBytes()`, PyTorch's malloc'd bytes, after a collection, over those before); step time
 * is a median forward + backward + AdamW step. The aim: full AC holds at most half the
 * activation memory of none.
 *
 * Usage (worker): deno run -A --v8-flags=--expose-gc bench/activation_checkpoint.ts --worker
 * @module
 */

import {
  allocatedBytes,
  manualSeed,
  nn,
  optim,
  parallel,
  setNumThreads,
  tensor,
  tidy,
} from "../mod.ts";
import { alternate, med, num, type Options, ratio, single, table } from "./bench_lib.ts";
import { denoWorker, pythonWorker } from "./runner.ts";
import { report } from "./workload.ts";

const SHAPE = { layers: 4, heads: 4, width: 64, block: 256, vocab: 256, batch: 4 };
const RUN = { threads: 1, warmup: 1, steps: 5 };
const ARGS = Object.entries({ ...SHAPE, ...RUN }).map(([k, v]) => `--${k}=${v}`);

function measure(ac: "none" | "full"): { activationBytes: number; stepMs: number } {
  const { layers, heads, width, block, vocab, batch } = SHAPE;
  manualSeed(0);
  const model = new nn.GPT({
    vocabSize: vocab,
    blockSize: block,
    nLayer: layers,
    nHead: heads,
    nEmbd: width,
  });
  if (ac === "full") parallel.applyActivationCheckpointing(model, { mode: "full" });
  const opt = new optim.AdamW(model.parameters(), { lr: 1e-3 });
  const tokens = Int32Array.from({ length: batch * (block + 1) }, (_, i) => (i * 7919) % vocab);
  const x = tensor(tokens.filter((_, i) => i % (block + 1) !== block), [batch, block], {
    dtype: "i32",
  });
  const y = tensor(tokens.filter((_, i) => i % (block + 1) !== 0), [batch, block], {
    dtype: "i32",
  });
  const gc = (globalThis as { gc?: () => void }).gc;
  if (gc === undefined) {
    throw new Error("bench/activation_checkpoint.ts: run with --v8-flags=--expose-gc");
  }
  const step = (record?: number[]) =>
    tidy(() => {
      let before = 0;
      if (record) {
        gc();
        before = allocatedBytes();
      }
      const { loss } = model.forward(x, y);
      if (record) {
        gc();
        record.push(allocatedBytes() - before);
      }
      loss.backward();
      opt.step();
      opt.zeroGrad();
    });
  for (let i = 0; i < RUN.warmup; i++) step();
  const held: number[] = [];
  step(held);
  const times: number[] = [];
  for (let i = 0; i < RUN.steps; i++) {
    const start = performance.now();
    step();
    times.push(performance.now() - start);
  }
  times.sort((a, b) => a - b);
  return { activationBytes: held[0], stepMs: times[times.length >> 1] };
}

/** The section: dtrain and PyTorch alternately, `options.rounds` times each. */
export async function benchActivationCheckpoint(options: Options, python: string | null) {
  const { layers, width, block, batch } = SHAPE;
  console.log(
    `\n(f) activation checkpointing: GPT ${layers}x${width}, block ${block}, batch ${batch}, ` +
      "full AC (every block) against none, 1 thread",
  );
  const runs = await alternate(
    "activation checkpointing",
    options.rounds,
    {
      dtrain: single(denoWorker("activation_checkpoint.ts", ["--worker"])),
      torch: python
        ? single(pythonWorker(python, "activation_checkpoint_torch.py", ARGS))
        : undefined,
    },
    (r) =>
      `full/none activation memory ${
        ratio(Number(r.fullActivationBytes) / Number(r.noneActivationBytes))
      }`,
  );
  const d = (name: string) => med(runs.dtrain, name), t = (name: string) => med(runs.torch, name);
  const mib = (x: number) => `${num(x / 2 ** 20, 2)} MiB`;
  const ms = (x: number) => `${num(x, 1)} ms`;
  const rows = [
    ["activation memory, no AC", mib(d("noneActivationBytes")), mib(t("noneActivationBytes"))],
    ["activation memory, full AC", mib(d("fullActivationBytes")), mib(t("fullActivationBytes"))],
    [
      "full AC / no AC activation memory (aim ≤ 0.50)",
      ratio(d("fullActivationBytes") / d("noneActivationBytes")),
      ratio(t("fullActivationBytes") / t("noneActivationBytes")),
    ],
    ["step time, no AC", ms(d("noneStepMs")), ms(t("noneStepMs"))],
    ["step time, full AC", ms(d("fullStepMs")), ms(t("fullStepMs"))],
    [
      "full AC / no AC step time",
      ratio(d("fullStepMs") / d("noneStepMs")),
      ratio(t("fullStepMs") / t("noneStepMs")),
    ],
    ["full AC step time, dtrain / PyTorch", ratio(d("fullStepMs") / t("fullStepMs")), ""],
  ];
  console.log(`\n${table(["(f) activation checkpointing", "dtrain", "PyTorch"], rows)}`);
  return runs;
}

if (import.meta.main && Deno.args.includes("--worker")) {
  setNumThreads(RUN.threads);
  const none = measure("none"), full = measure("full");
  report({
    framework: "dtrain",
    noneActivationBytes: none.activationBytes,
    fullActivationBytes: full.activationBytes,
    noneStepMs: none.stepMs,
    fullStepMs: full.stepMs,
  });
}
