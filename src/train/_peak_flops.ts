/**
 * The peak that model flops utilisation divides by. nanoGPT's `estimate_mfu` divides by an A100's
 * bf16 peak, which is right on an A100 and meaningless on a CPU (a laptop's 0.01% says nothing).
 * So: the peak the user gives (`--peak-flops`, or DTRAIN_PEAK_FLOPS), else on CUDA the A100's (as
 * nanoGPT), else this machine's own, measured once at the start with dtrain's matmul at the
 * threads and dtype the job computes with.
 * @module
 */

import { noGrad } from "../tensor/autograd.ts";
import { randn } from "../tensor/creation.ts";
import type { Device } from "../tensor/storage.ts";
import { FAMILIES, type FamilyRecord, isFamilyName } from "../tensor/device/mod.ts";

/** `--peak-flops`, or undefined when not given (its default, 0). */
export function peakFlopsFlag(config: { peakFlops: number }): number | undefined {
  return config.peakFlops > 0 ? config.peakFlops : undefined;
}

/** A peak in FLOP/s, and how the log line names it. */
export interface PeakFlops {
  /** FLOP/s that count as 100%. */
  flops: number;
  /** What the MFU is a fraction of, e.g. `cpu f32 matmul 48.1 GFLOP/s, measured`. */
  label: string;
}

/** The square matrices of the measurement: 2·512³ flops, a few ms on one core. */
const SIZE = 512;
/** The measurement's budget: the best of the products that fit (after one to warm up). */
const BUDGET_MS = 300, MAX_REPEATS = 20;

/** `flops` in the unit a log reads best: `48.1 GFLOP/s`. */
export function formatFlops(flops: number): string {
  const units = [[1e15, "PFLOP/s"], [1e12, "TFLOP/s"], [1e9, "GFLOP/s"], [1e6, "MFLOP/s"]] as const;
  const [scale, unit] = units.find(([s]) => flops >= s) ?? [1, "FLOP/s"];
  return `${Number((flops / scale).toPrecision(3))} ${unit}`;
}

/**
 * The fastest rate of dtrain's matmul of two [512, 512] matrices of `dtype` on `device`, over at
 * most 300 ms: what the job's own kernels reach on this machine with its threads.
 */
export function measureMatmulFlops(device: Device, dtype: "f32" | "bf16"): number {
  return noGrad(() => {
    const a = randn([SIZE, SIZE], { device }).to(dtype),
      b = randn([SIZE, SIZE], { device }).to(dtype);
    let best = Infinity;
    const start = performance.now();
    for (let i = 0; i <= MAX_REPEATS && performance.now() - start < BUDGET_MS; i++) {
      const t0 = performance.now();
      const c = a.matmul(b);
      // Reading an element waits for the product on a device that runs ahead of the host.
      c.narrow(0, 0, 1).narrow(1, 0, 1).toArray();
      const ms = performance.now() - t0;
      c.dispose();
      if (i > 0) best = Math.min(best, ms); // the first warms the kernels and caches
    }
    a.dispose();
    b.dispose();
    return (2 * SIZE ** 3) / (best / 1000);
  });
}

/**
 * The peak to report MFU against: `given` (FLOP/s) when set, else DTRAIN_PEAK_FLOPS, else the
 * family's nominal peak (cuda's: an A100's bf16, nanoGPT's), else the measured rate of this
 * machine's matmul.
 *
 * @param family The job's device family (`--device`).
 * @param device This process's device.
 * @param dtype The dtype the job computes in (`--dtype`).
 * @param given `--peak-flops`, or 0/undefined when not given.
 * @throws RangeError when DTRAIN_PEAK_FLOPS is not a positive number.
 */
export function peakFlops(
  family: string,
  device: Device,
  dtype: "f32" | "bf16",
  given?: number,
): PeakFlops {
  if (given) return { flops: given, label: `--peak-flops ${formatFlops(given)}` };
  const env = Deno.env.get("DTRAIN_PEAK_FLOPS");
  if (env !== undefined) {
    const flops = Number(env);
    if (!(flops > 0 && Number.isFinite(flops))) {
      throw new RangeError(`DTRAIN_PEAK_FLOPS: expected a positive number of FLOP/s, got ${env}`);
    }
    return { flops, label: `DTRAIN_PEAK_FLOPS ${formatFlops(flops)}` };
  }
  const record: FamilyRecord | undefined = isFamilyName(family) ? FAMILIES[family] : undefined;
  const nominal = record?.nominalPeak;
  if (nominal !== undefined) {
    return { flops: nominal.flops, label: `${nominal.of} ${formatFlops(nominal.flops)}` };
  }
  const flops = measureMatmulFlops(device, dtype);
  return { flops, label: `${family} ${dtype} matmul ${formatFlops(flops)}, measured` };
}
