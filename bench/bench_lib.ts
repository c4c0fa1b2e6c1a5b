/**
 * What the sections of `make bench` (bench/main.ts) share: the alternation of dtrain and PyTorch
 * runs round by round, the multi-rank launch, and the statistics and table formatting.
 * @module
 */

import { type Command, freePort, type ResultParser, type RunResult, runWorkers } from "./runner.ts";

/** The sections `--only` can name, in the order they run. */
export const SECTIONS = [
  "single",
  "ddp",
  "allreduce",
  "gpt",
  "fsdp",
  "ac",
  "nd",
  "pipeline",
] as const;
export type Section = typeof SECTIONS[number];
/**
 * dtrain as the job picks (shared memory on one host), dtrain on memory every rank maps
 * (emptyShared; the all-reduce section only), dtrain with DTRAIN_SHM=0, PyTorch.
 */
export type Framework = "dtrain" | "shared" | "gloo" | "torch";
export type Runs = Record<Framework, RunResult[]>;

/** The command line of `make bench`, parsed (bench/main.ts). */
export interface Options {
  sections: Section[];
  rounds: number;
  json: string;
  torch: boolean;
}

/** One way to run a workload on each side (the others absent when not compared). */
export type Sides = {
  dtrain: () => Promise<RunResult>;
  shared?: () => Promise<RunResult>;
  gloo?: () => Promise<RunResult>;
  torch?: () => Promise<RunResult>;
};

/** Runs the sides alternately, A B then B A, `rounds` times; logs each run as it ends. */
export async function alternate(
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
export function ranks(
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
export function single(worker: Command, parse?: ResultParser): () => Promise<RunResult> {
  return () => runWorkers("single", [worker], () => ({}), TIMEOUT_MS, parse);
}

/** How long one run of a workload may take before it is killed. */
export const TIMEOUT_MS = 600_000;

// ---------------------------------------------------------------- statistics and formatting

/** The median of the finite values, NaN when there are none. */
export function median(values: number[]): number {
  const v = values.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (v.length === 0) return NaN;
  return v.length % 2 ? v[(v.length - 1) / 2] : (v[v.length / 2 - 1] + v[v.length / 2]) / 2;
}

/** (max - min) / median of a field over runs: how far apart the rounds were. */
export function spread(values: number[]): number {
  const m = median(values);
  return values.length > 1 ? (Math.max(...values) - Math.min(...values)) / m : 0;
}

/** A numeric field of every run that reported it. */
export function field(runs: RunResult[], name: string): number[] {
  return runs.map((r) => r.result[name]).filter((v): v is number => typeof v === "number");
}

/** The median of a field over runs. */
export function med(runs: RunResult[], name: string): number {
  return median(field(runs, name));
}

/** dtrain/PyTorch of a field in each round (both sides ran back to back), e.g. "1.52 1.61". */
export function roundRatios(runs: Runs, name: string): string {
  const d = field(runs.dtrain, name), t = field(runs.torch, name);
  return d.slice(0, t.length).map((x, i) => (x / t[i]).toFixed(2)).join(" ");
}

/** A share as a whole percentage ("—" when not finite). */
export function pct(x: number): string {
  return Number.isFinite(x) ? `${(x * 100).toFixed(0)}%` : "—";
}

/** A number with thousands separators and `digits` decimals ("—" when not finite). */
export function num(x: number, digits = 0): string {
  return Number.isFinite(x)
    ? x.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits })
    : "—";
}

/** A ratio as "1.23×" ("—" when not a positive finite number). */
export function ratio(x: number): string {
  return Number.isFinite(x) && x > 0 ? `${x.toFixed(2)}×` : "—";
}

/** A power-of-two byte count as KiB or MiB. */
export function bytesLabel(n: number): string {
  return n >= 2 ** 20 ? `${n / 2 ** 20} MiB` : `${n / 1024} KiB`;
}

/** A Markdown table with padded columns. */
export function table(header: string[], rows: string[][]): string {
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
