/**
 * How `make bench` runs its workers: each side in processes of its own (so dtrain and PyTorch
 * never share threads), one `BENCH_RESULT` line read back from each, and a note of how busy the
 * machine was just before, since the numbers are only as quiet as the machine.
 * @module
 */

import { fileURLToPath } from "node:url";
import { loadDtrain } from "../ffi/dtrain.ts";
import { openblasCoreName } from "../ffi/openblas_core.ts";
import { bf16MatmulBackend } from "../src/tensor/device/bf16_gemm.ts";
import { epochMs } from "./workload.ts";

/** A command to run: the program and its arguments. */
export interface Command {
  cmd: string;
  args: string[];
}

/** What one worker run returned. */
export interface RunResult {
  /** The worker's result object (rank 0's for multi-process runs). */
  result: Record<string, unknown>;
  /** Share of the machine's CPU time that other processes used in the half second before. */
  backgroundBusy: number;
}

const BENCH_DIR = new URL(".", import.meta.url);

/** `deno run` of a worker in bench/, with the flags the training job uses. */
export function denoWorker(file: string, args: string[] = []): Command {
  const script = fileURLToPath(new URL(file, BENCH_DIR));
  return {
    cmd: Deno.execPath(),
    args: ["run", "-A", "--v8-flags=--expose-gc", script, ...args],
  };
}

/** `python bench/<file> ...args` with the given interpreter. */
export function pythonWorker(python: string, file: string, args: string[]): Command {
  return { cmd: python, args: [fileURLToPath(new URL(file, BENCH_DIR)), ...args] };
}

/** Whether bench/<file> exists. */
export function benchFileExists(file: string): boolean {
  return existsFile(fileURLToPath(new URL(file, BENCH_DIR)));
}

/** A TCP port nobody listens on right now. */
export function freePort(): number {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = listener.addr.port;
  listener.close();
  return port;
}

/** Busy and total jiffies of all CPUs from /proc/stat (zeros where it is missing). */
function cpuJiffies(): { busy: number; total: number } {
  try {
    const fields = Deno.readTextFileSync("/proc/stat").split("\n")[0].trim().split(/\s+/)
      .slice(1).map(Number);
    const total = fields.reduce((a, b) => a + b, 0);
    return { busy: total - fields[3] - (fields[4] ?? 0), total };
  } catch {
    return { busy: 0, total: 0 };
  }
}

/** The share of CPU time other processes take over the next `ms` milliseconds. */
export async function backgroundBusy(ms = 500): Promise<number> {
  const a = cpuJiffies();
  await new Promise((resolve) => setTimeout(resolve, ms));
  const b = cpuJiffies();
  return b.total > a.total ? (b.busy - a.busy) / (b.total - a.total) : 0;
}

/** Finds a worker's result in its standard output. */
export type ResultParser = (stdout: string) => Record<string, unknown> | undefined;

/** The last `BENCH_RESULT {...}` line, as this folder's workers print it. */
export const benchResultLine: ResultParser = (stdout) => {
  const line = stdout.split("\n").reverse().find((l) => l.startsWith("BENCH_RESULT "));
  return line === undefined ? undefined : JSON.parse(line.slice("BENCH_RESULT ".length));
};

/** The last line that is a JSON object (bench/allreduce.ts and its Python twin). */
export const lastJsonLine: ResultParser = (stdout) => {
  const line = stdout.trim().split("\n").reverse().find((l) => l.startsWith("{"));
  return line === undefined ? undefined : JSON.parse(line);
};

/**
 * Runs `commands` at once (one per rank, or a single one) and returns the first result that
 * `parse` finds, in command order. Every process gets `DTRAIN_BENCH_T0` (this clock at spawn) and
 * `env`; after `timeoutMs` all are killed. Throws with the failing process's stderr tail.
 */
export async function runWorkers(
  what: string,
  commands: Command[],
  env: (index: number) => Record<string, string>,
  timeoutMs: number,
  parse: ResultParser = benchResultLine,
): Promise<RunResult> {
  const busy = await backgroundBusy();
  const t0 = String(epochMs());
  const children = commands.map(({ cmd, args }, i) =>
    new Deno.Command(cmd, {
      args,
      env: { ...env(i), DTRAIN_BENCH_T0: t0 },
      stdout: "piped",
      stderr: "piped",
    }).spawn()
  );
  const timer = setTimeout(() => {
    for (const child of children) {
      try {
        child.kill("SIGKILL");
      } catch { /* already gone */ }
    }
  }, timeoutMs);
  try {
    const outputs = await Promise.all(children.map((c) => c.output()));
    const decoder = new TextDecoder();
    let result: Record<string, unknown> | undefined;
    for (const [i, out] of outputs.entries()) {
      const stdout = decoder.decode(out.stdout);
      if (!out.success) {
        const tail = decoder.decode(out.stderr).trim().split("\n").slice(-15).join("\n");
        throw new Error(
          `${what}: process ${i} (${commands[i].cmd} ${commands[i].args.join(" ")}) ` +
            `exited with ${out.signal ?? out.code}:\n${tail}`,
        );
      }
      result ??= parse(stdout);
    }
    if (result === undefined) throw new Error(`${what}: no result line in the output`);
    return { result, backgroundBusy: busy };
  } finally {
    clearTimeout(timer);
  }
}

/** The bf16 product engine and why, or the error of a forced engine that cannot run. */
function bf16MatmulText(): string {
  try {
    const { name, reason } = bf16MatmulBackend();
    return `${name} (${reason})`;
  } catch (e) {
    return (e as Error).message;
  }
}

/** A machine description for the report: CPU model, logical CPUs, memory, kernel. */
export function machineInfo(): Record<string, unknown> {
  let cpu = "unknown";
  try {
    cpu = Deno.readTextFileSync("/proc/cpuinfo").match(/^model name\s*:\s*(.+)$/m)?.[1] ?? cpu;
  } catch { /* not Linux */ }
  return {
    cpu,
    logicalCpus: navigator.hardwareConcurrency,
    memoryGiB: Math.round(Deno.systemMemoryInfo().total / 2 ** 30),
    kernel: Deno.osRelease(),
    // Which kernels OpenBLAS runs ("Prescott" is its generic fallback; see ffi/openblas_core.ts).
    blasCore: openblasCoreName(loadDtrain().openblas_get_corename) ?? "not OpenBLAS",
    // Which engine multiplies bf16 matrices (oneDNN or f32 sgemm; see src/tensor/device/bf16_gemm.ts).
    bf16Matmul: bf16MatmulText(),
    loadavg: Deno.loadavg(),
    deno: Deno.version.deno,
  };
}

/**
 * The PyTorch interpreter: `python` when given, else `DTRAIN_BENCH_PYTHON`, else `python3` from
 * PATH; with torch's version, or the reason it cannot be used.
 */
export async function findTorch(python = Deno.env.get("DTRAIN_BENCH_PYTHON") ?? "python3"): Promise<
  { python: string; version: string } | { python: string; error: string }
> {
  try {
    const out = await new Deno.Command(python, {
      args: [
        "-c",
        "import torch, torch.distributed as d; print(torch.__version__, d.is_available())",
      ],
      stdout: "piped",
      stderr: "piped",
    }).output();
    const text = new TextDecoder().decode(out.stdout).trim();
    if (!out.success) {
      const err = new TextDecoder().decode(out.stderr).trim().split("\n").pop();
      return { python, error: `\`import torch\` failed: ${err}` };
    }
    const [version, distributed] = text.split(" ");
    if (distributed !== "True") {
      return { python, error: `torch ${version} lacks torch.distributed` };
    }
    return { python, version };
  } catch (e) {
    return { python, error: (e as Error).message };
  }
}

function existsFile(path: string): boolean {
  try {
    return Deno.statSync(path).isFile;
  } catch {
    return false;
  }
}
