/**
 * The benchmark workload, in one place: the model, the batch, the optimizer and the FLOP count
 * that both dtrain's workers and the PyTorch side (bench/torch_side.py, given these numbers on its
 * command line) run. Also the helpers every dtrain worker uses to report.
 * @module
 */

import { GPT } from "../src/nn/gpt.ts";
import { manualSeed } from "../src/tensor/random.ts";

/** Layer sizes of the MLP: Linear(784,512), ReLU, Linear(512,512), ReLU, Linear(512,10). */
export const SIZES = [784, 512, 512, 10] as const;
/** Samples per optimizer step (per rank under DDP). */
export const BATCH = 64;
/** SGD hyperparameters. */
export const LR = 0.01;
/** SGD momentum. */
export const MOMENTUM = 0.9;
/** Fashion-MNIST's training-set pixel statistics, as in the usual `Normalize`. */
export const NORMALIZE = { mean: 0.2860, std: 0.3530 };
/** Seed of the model initialisation and of the shuffled orders. */
export const SEED = 0;
/** Side of the square sgemm that measures the machine's peak. */
export const PEAK_N = 2048;
/** Timed repetitions of the peak sgemm; the best counts (the machine is shared). */
export const PEAK_REPS = 8;
/**
 * Matrix-product FLOPs of one training step of the MLP on `batch` samples: 2·B·in·out per linear
 * forward, twice that in backward (input and weight gradients), except the first layer's input
 * gradient, which is not computed.
 */
export function flopsPerStep(batch: number, sizes: readonly number[] = SIZES): number {
  let forward = 0;
  for (let i = 0; i + 1 < sizes.length; i++) forward += 2 * batch * sizes[i] * sizes[i + 1];
  return 3 * forward - 2 * batch * sizes[0] * sizes[1];
}

/** The process's peak resident set (VmHWM) in bytes, or null where /proc is missing. */
export function peakRssBytes(): number | null {
  try {
    const status = Deno.readTextFileSync("/proc/self/status");
    const kib = status.match(/^VmHWM:\s+(\d+)\s+kB/m);
    return kib ? Number(kib[1]) * 1024 : null;
  } catch {
    return null;
  }
}

/** Wall-clock milliseconds since the Unix epoch, with sub-millisecond precision. */
export function epochMs(): number {
  return performance.timeOrigin + performance.now();
}

/**
 * Milliseconds since the parent spawned this process (it passes its clock in
 * `DTRAIN_BENCH_T0`), or null when run by hand.
 */
export function sinceSpawnMs(): number | null {
  const t0 = Number(Deno.env.get("DTRAIN_BENCH_T0"));
  return Number.isFinite(t0) && t0 > 0 ? epochMs() - t0 : null;
}

/** Prints a worker's result as the one line the parent reads (`BENCH_RESULT {...}`). */
export function report(result: Record<string, unknown>): void {
  console.log(`BENCH_RESULT ${JSON.stringify(result)}`);
}

/** Reads `--name=value` from `args`, or `fallback`. */
export function argValue(args: readonly string[], name: string, fallback: string): string {
  const prefix = `--${name}=`;
  const hit = args.find((a) => a.startsWith(prefix));
  return hit === undefined ? fallback : hit.slice(prefix.length);
}

/**
 * The GPT benchmark: a GPT-2 style model (nanoGPT's architecture) of 4 layers, 4 heads, width
 * 256, block 128 over a 256-token vocabulary, batch 8, AdamW, fp32; `warmup` untimed steps, then
 * `steps` timed ones (bench/gpt.ts and bench/gpt_torch.py).
 */
export const GPT_BENCH = {
  layers: 4,
  heads: 4,
  width: 256,
  block: 128,
  vocab: 256,
  batch: 8,
  warmup: 3,
  steps: 10,
} as const;

/**
 * The GPT of a worker's `--vocab`, `--block`, `--n-layer`, `--n-head` and `--n-embd`, from seed 0,
 * so that every rank (and every worker of a section) starts from the same weights.
 *
 * @param int Reads one of those arguments as an integer.
 */
export function benchGPT(int: (name: string) => number): GPT {
  manualSeed(0);
  return new GPT({
    vocabSize: int("vocab"),
    blockSize: int("block"),
    nLayer: int("n-layer"),
    nHead: int("n-head"),
    nEmbd: int("n-embd"),
  });
}
