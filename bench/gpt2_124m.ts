/**
 * GPT-2 124M side by side with PyTorch (issue 39): dtrain (bench/gpt2_124m_worker.ts) and
 * nanoGPT's `model.py` (bench/gpt2_124m_torch.py) at GPT-2 124M's shape (12 layers, 12 heads,
 * width 768, vocabulary 50,304, f32, dropout 0), micro-batch `--batch`, block `--block`, AdamW,
 * random tokens, in three rows: one process of 2 threads, DDP on 2 ranks and FSDP on 2 ranks
 * (1 thread each). The two sides alternate (dtrain, PyTorch, dtrain, PyTorch, ...) so the shared
 * machine's noise falls on both. Prints a markdown table (tokens/s and the largest peak RSS of
 * any rank, with the ratios) and the raw results as JSON.
 *
 * Usage: deno run -A bench/gpt2_124m.ts [--block=1024] [--batch=1] [--steps=2] [--warmup=1]
 *   [--rows=single,ddp,fsdp] [--rounds=1] [--python=PATH (else DTRAIN_BENCH_PYTHON, else python3)]
 * @module
 */

import { parseArgs } from "node:util";
import { fileURLToPath } from "node:url";
import { freePort } from "./runner.ts";
import { peakRssBytes } from "./workload.ts";

const { values } = parseArgs({
  args: Deno.args,
  options: Object.fromEntries(
    ["block", "batch", "steps", "warmup", "rows", "python", "rounds"].map((
      name,
    ) => [name, { type: "string" as const }]),
  ),
});
const shape = {
  vocab: 50304,
  block: Number(values.block ?? 1024),
  "n-layer": 12,
  "n-head": 12,
  "n-embd": 768,
  batch: Number(values.batch ?? 1),
  steps: Number(values.steps ?? 2),
  warmup: Number(values.warmup ?? 1),
};
const python = values.python ?? Deno.env.get("DTRAIN_BENCH_PYTHON") ?? "python3";
const rows = (values.rows ?? "single,ddp,fsdp").split(",");
const rounds = Number(values.rounds ?? 1);
const here = (file: string) => fileURLToPath(new URL(file, import.meta.url));

/** One worker's `BENCH_RESULT` object. */
type Result = { tokensPerSecond: number; peakRssBytes: number; stepMs: number[] };

/** Runs one side of one row (all its ranks at once) and returns every rank's result. */
async function runSide(side: "dtrain" | "torch", strategy: string): Promise<Result[]> {
  const world = strategy === "single" ? 1 : 2;
  const threads = strategy === "single" ? 2 : 1;
  const port = freePort();
  const token = crypto.randomUUID();
  const children = Array.from({ length: world }, (_, rank) => {
    const common = Object.entries({ ...shape, threads, strategy });
    const command = side === "dtrain"
      ? new Deno.Command(Deno.execPath(), {
        args: [
          "run",
          "-A",
          "--v8-flags=--expose-gc",
          here("gpt2_124m_worker.ts"),
          ...common.map(([k, v]) => `--${k}=${v}`),
        ],
        env: {
          RANK: String(rank),
          WORLD_SIZE: String(world),
          LOCAL_RANK: String(rank),
          MASTER_ADDR: "127.0.0.1",
          MASTER_PORT: String(port),
          DTRAIN_TOKEN: token,
        },
        stdout: "piped",
        stderr: "piped",
      })
      : new Deno.Command(python, {
        args: [
          here("gpt2_124m_torch.py"),
          ...[...common, ["rank", rank], ["world-size", world], ["port", port]].flatMap((
            [k, v],
          ) => [`--${k}`, String(v)]),
        ],
        env: { OMP_NUM_THREADS: String(threads) },
        stdout: "piped",
        stderr: "piped",
      });
    return command.spawn();
  });
  const outputs = await Promise.all(children.map((c) => c.output()));
  return outputs.map((out, rank) => {
    const stdout = new TextDecoder().decode(out.stdout);
    const line = stdout.split("\n").find((l) => l.startsWith("BENCH_RESULT "));
    if (!out.success || line === undefined) {
      const tail = new TextDecoder().decode(out.stderr).trim().split("\n").slice(-15).join("\n");
      throw new Error(`${side} ${strategy} rank ${rank} exited with ${out.code}:\n${tail}`);
    }
    return JSON.parse(line.slice("BENCH_RESULT ".length)) as Result;
  });
}

const gib = (bytes: number) => (bytes / 2 ** 30).toFixed(2);
const raw: Record<string, unknown>[] = [];
const table: string[] = [
  "| row | dtrain tokens/s | PyTorch tokens/s | ratio | dtrain peak RSS/rank (GiB) | PyTorch peak RSS/rank (GiB) | ratio |",
  "|---|---:|---:|---:|---:|---:|---:|",
];
for (const strategy of rows) {
  const best = { dtrain: { tps: 0, rss: 0 }, torch: { tps: 0, rss: 0 } };
  for (let round = 0; round < rounds; round++) {
    for (const side of ["dtrain", "torch"] as const) {
      const load = Deno.loadavg();
      const started = new Date().toISOString();
      const results = await runSide(side, strategy);
      const tps = results[0].tokensPerSecond;
      const rss = Math.max(...results.map((r) => r.peakRssBytes));
      best[side].tps = Math.max(best[side].tps, tps);
      best[side].rss = Math.max(best[side].rss, rss);
      raw.push({ side, strategy, started, loadBefore: load, tps, rss, results });
      console.error(
        `${started} ${side} ${strategy}: ${tps.toFixed(1)} tokens/s, peak RSS ${gib(rss)} GiB, ` +
          `steps ${results[0].stepMs.map((ms) => ms.toFixed(0)).join("/")} ms, load ${load[0]}`,
      );
    }
  }
  table.push(
    `| ${strategy} | ${best.dtrain.tps.toFixed(1)} | ${best.torch.tps.toFixed(1)} | ${
      (best.dtrain.tps / best.torch.tps).toFixed(2)
    }× | ${gib(best.dtrain.rss)} | ${gib(best.torch.rss)} | ${
      (best.dtrain.rss / best.torch.rss).toFixed(2)
    }× |`,
  );
}
console.log(table.join("\n"));
console.log(JSON.stringify({ shape, python, driverPeakRss: peakRssBytes(), raw }));
