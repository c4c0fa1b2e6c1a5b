/**
 * The planner's machine numbers: dtrain's matmul rate at the widths a model uses, the cost of one
 * small kernel call, the memory bandwidth and a 2-rank all-reduce over shared memory. Measured
 * once and cached in `~/.cache/dtrain/machine.json` (DTRAIN_MACHINE_CACHE names another file),
 * keyed by the CPU model and the thread count, so that later plans are instant.
 * @module
 */

import { dirname, join } from "node:path";
import { noGrad } from "../tensor/autograd.ts";
import { randn } from "../tensor/creation.ts";
import { setNumThreads } from "../tensor/threads.ts";

/** What the planner knows of this machine at one thread count. */
export interface MachineNumbers {
  /** f32 matmul FLOP/s of [n, n] × [n, n] by n (64, 128, 256, 512). */
  matmulFlops: Record<string, number>;
  /** bf16 matmul FLOP/s at n = 256 (the bf16 engine dtrain picked on this CPU). */
  bf16MatmulFlops: number;
  /** Seconds of one small op forward and backward (the per-op floor of a small model). */
  opSeconds: number;
  /** Bytes per second an elementwise copy of a large tensor moves (read + write). */
  copyBytesPerSecond: number;
  /** Bytes per second of a 2-rank all-reduce over shared memory, and its latency in seconds. */
  allReduce: { bytesPerSecond: number; latencySeconds: number };
  /** Resident bytes of a rank before its tensors: Deno, dtrain's modules and native libraries. */
  baselineRssBytes: number;
}

/** The cache file: DTRAIN_MACHINE_CACHE, else ~/.cache/dtrain/machine.json. */
export function machineCachePath(): string {
  const given = Deno.env.get("DTRAIN_MACHINE_CACHE");
  if (given) return given;
  const home = Deno.env.get("HOME") ?? "/tmp";
  return join(home, ".cache", "dtrain", "machine.json");
}

/** `model name` of /proc/cpuinfo, or the architecture where it is not readable. */
export function cpuModel(): string {
  try {
    const line = Deno.readTextFileSync("/proc/cpuinfo").split("\n")
      .find((l) => l.startsWith("model name"));
    if (line) return line.split(":")[1].trim();
  } catch { /* not Linux */ }
  return Deno.build.arch;
}

/**
 * The median time of `fn` over `repeats` runs after one to warm up, in seconds: the median, not the
 * best, so that a machine shared with other work is measured as the job will find it.
 */
function median(fn: () => void, repeats: number): number {
  fn();
  const times: number[] = [];
  for (let i = 0; i < repeats; i++) {
    const t0 = performance.now();
    fn();
    times.push(performance.now() - t0);
  }
  times.sort((a, b) => a - b);
  return times[Math.floor(repeats / 2)] / 1000;
}

/** Measures the compute numbers in this process at `threads` threads. */
function measureCompute(
  threads: number,
): Omit<MachineNumbers, "allReduce" | "baselineRssBytes"> {
  setNumThreads(threads);
  // A small op forward and its backward, autograd's bookkeeping included: the floor of each
  // layer's call in a small model's step.
  const factor = randn([64]);
  const opSeconds = median(() => {
    let y = randn([64], { requiresGrad: true });
    for (let i = 0; i < 50; i++) y = y.mul(factor);
    y.sum().backward();
  }, 9) / 50;
  return noGrad(() => {
    const matmulFlops: Record<string, number> = {};
    for (const n of [64, 128, 256, 512]) {
      const a = randn([n, n]), b = randn([n, n]);
      const s = median(() => a.matmul(b).dispose(), n >= 512 ? 5 : 20);
      matmulFlops[n] = 2 * n ** 3 / s;
      a.dispose(), b.dispose();
    }
    const a16 = randn([256, 256]).to("bf16"), b16 = randn([256, 256]).to("bf16");
    const bf16MatmulFlops = 2 * 256 ** 3 / median(() => a16.matmul(b16).dispose(), 9);
    a16.dispose(), b16.dispose();
    const small = randn([64]);
    const count = 8 * 2 ** 20, big = randn([count]);
    const copySeconds = median(() => big.mul(2).dispose(), 5);
    big.dispose(), small.dispose();
    const copyBytesPerSecond = 2 * count * 4 / copySeconds;
    return { matmulFlops, bf16MatmulFlops, opSeconds, copyBytesPerSecond };
  });
}

/**
 * A 2-rank all-reduce's bandwidth and latency: the launcher runs
 * `_plan_allreduce_worker.ts` on two processes, which time 64 KiB and 16 MiB all-reduces.
 */
async function measureAllReduce(): Promise<MachineNumbers["allReduce"]> {
  const out = await Deno.makeTempFile({ suffix: ".json" });
  const worker = new URL("./_plan_allreduce_worker.ts", import.meta.url).pathname;
  const launcher = new URL("../launch/main.ts", import.meta.url).pathname;
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", launcher, "--nproc-per-node", "2", worker, out],
    env: { DTRAIN_TOKEN: Deno.env.get("DTRAIN_TOKEN") ?? "dtrain-plan-probe" },
    stdout: "null",
    stderr: "piped",
  }).output();
  const { success, stderr } = await child;
  if (!success) {
    throw new Error(`planner: the all-reduce probe failed: ${new TextDecoder().decode(stderr)}`);
  }
  const result = JSON.parse(await Deno.readTextFile(out));
  await Deno.remove(out);
  return result;
}

/**
 * How much slower this machine computes now than when its numbers were measured (at least 1):
 * [256, 256] matmuls back to back for 300 ms against the cached rate. A machine shared with other
 * work runs the job at its present load; this puts that load into the plan. It runs for 300 ms,
 * not a few, because a thread that just woke runs ahead of the others for its first tens of
 * milliseconds (the scheduler's credit for having slept), while a training step does not.
 *
 * @param machine The cached numbers.
 * @param threads The thread count they were measured at.
 */
export function presentSlowdown(machine: MachineNumbers, threads: number): number {
  setNumThreads(threads);
  return noGrad(() => {
    const a = randn([256, 256]), b = randn([256, 256]);
    const start = performance.now();
    let products = 0;
    while (performance.now() - start < 300) {
      a.matmul(b).dispose();
      products++;
    }
    const rate = products * 2 * 256 ** 3 / ((performance.now() - start) / 1000);
    a.dispose(), b.dispose();
    return Math.max(1, machine.matmulFlops[256] / rate);
  });
}

/**
 * The resident set of a fresh process that loaded what a rank loads (the train job's modules,
 * libdtrain and its BLAS, one tensor), less its tensors: what a rank's RSS has on top of them.
 */
async function measureBaselineRss(): Promise<number> {
  const probe = new URL("./_plan_rss_probe.ts", import.meta.url).pathname;
  const { success, stdout, stderr } = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", probe],
    stdout: "piped",
    stderr: "piped",
  }).output();
  if (!success) {
    throw new Error(`planner: the RSS probe failed: ${new TextDecoder().decode(stderr)}`);
  }
  return Number(new TextDecoder().decode(stdout).trim());
}

/**
 * This machine's numbers at `threads` threads: from the cache, else measured (about a second,
 * plus two processes for the all-reduce) and written to it.
 *
 * @param threads The thread count each rank computes with.
 */
export async function machineNumbers(threads: number): Promise<MachineNumbers> {
  const path = machineCachePath();
  // The version names what is measured and how: numbers of an older planner are measured again.
  const key = `v2 ${cpuModel()} × ${threads} threads`;
  let cache: Record<string, MachineNumbers> = {};
  try {
    cache = JSON.parse(await Deno.readTextFile(path));
  } catch { /* none yet, or unreadable: measured again */ }
  if (cache[key] !== undefined) return cache[key];
  const numbers = {
    ...measureCompute(threads),
    allReduce: await measureAllReduce(),
    baselineRssBytes: await measureBaselineRss(),
  };
  cache[key] = numbers;
  try {
    await Deno.mkdir(dirname(path), { recursive: true });
    await Deno.writeTextFile(path, JSON.stringify(cache, null, 2) + "\n");
  } catch { /* a read-only home: measured each time */ }
  return numbers;
}
