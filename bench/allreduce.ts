/**
 * All-reduce benchmark: time and bus bandwidth of dtrain's Gloo all-reduce between two
 * processes on 127.0.0.1, for f32 tensors of 4 KiB ... 64 MiB, side by side with
 * torch.distributed over Gloo (bench/allreduce_torch.py) when a PyTorch Python is available.
 *
 *     deno run -A bench/allreduce.ts [--rounds 2] [--python PYTHON] [--no-torch]
 *
 * The PyTorch side runs with `--python`, else `DTRAIN_BENCH_PYTHON`, else `python3` from PATH, and
 * is skipped (with the reason) when that Python cannot import torch.distributed.
 *
 * busbw = 2(n-1)/n × bytes / time, the NCCL-tests convention. Both sides use the same sizes,
 * iteration counts, warm-up and timing rule: the fastest of 5 trials of back-to-back
 * all-reduces, and the fastest over `--rounds` runs (default 2) that alternate dtrain and
 * torch, so that load from other processes on the machine hurts both alike.
 * @module
 */

import { fileURLToPath } from "node:url";
import {
  allReduce,
  barrier,
  destroyProcessGroup,
  emptyShared,
  initProcessGroup,
} from "../src/distributed/mod.ts";
import { zeros } from "../src/tensor/creation.ts";
import { findTorch } from "./runner.ts";

const SIZES = [4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20];
const TRIALS = 5;
const WORLD = 2;

interface Row {
  bytes: number;
  seconds: number;
}

/** About 256 MiB moved per trial, 5..1000 iterations (same rule as the Python twin). */
function iterations(bytes: number): number {
  return Math.max(5, Math.min(1000, Math.floor((256 << 20) / bytes)));
}

function busbw(bytes: number, seconds: number): number {
  return 2 * (WORLD - 1) / WORLD * bytes / seconds / 1e9;
}

async function worker(): Promise<void> {
  const group = await initProcessGroup({ timeoutMs: 120_000 });
  const rows: Row[] = [];
  // DTRAIN_BENCH_SHARED=1: the tensor lives in memory every rank maps (emptyShared), which the
  // shared-memory backend reduces in place.
  const shared = Deno.env.get("DTRAIN_BENCH_SHARED") === "1";
  for (const bytes of SIZES) {
    const x = shared ? await emptyShared([bytes / 4]) : zeros([bytes / 4]);
    x.fill_(1);
    const n = iterations(bytes);
    for (let i = 0; i < Math.min(n, 20); i++) await allReduce(x);
    const trials: number[] = [];
    for (let t = 0; t < TRIALS; t++) {
      await barrier();
      const start = performance.now();
      for (let i = 0; i < n; i++) await allReduce(x);
      trials.push((performance.now() - start) / 1000 / n);
    }
    rows.push({ bytes, seconds: Math.min(...trials) });
    x.dispose();
  }
  if (group.rank === 0) console.log(JSON.stringify({ rows }));
  await destroyProcessGroup();
}

async function run(cmd: string, args: string[], env: Record<string, string>): Promise<string> {
  const out = await new Deno.Command(cmd, { args, env, stderr: "inherit" }).output();
  if (!out.success) throw new Error(`${cmd} ${args.join(" ")} exited ${out.code}`);
  return new TextDecoder().decode(out.stdout);
}

function lastJson(stdout: string): { rows: Row[] } {
  const line = stdout.trim().split("\n").reverse().find((l) => l.startsWith("{"));
  if (!line) throw new Error(`no JSON result in:\n${stdout}`);
  return JSON.parse(line);
}

function freePort(): number {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = l.addr.port;
  l.close();
  return port;
}

async function main(): Promise<void> {
  const args = Deno.args;
  const flag = (name: string) => {
    const i = args.indexOf(name);
    return i >= 0 ? args[i + 1] : undefined;
  };
  const found = args.includes("--no-torch") ? undefined : await findTorch(flag("--python"));
  const python = found?.python ?? "";
  const withTorch = found !== undefined && "version" in found;
  if (found && "error" in found) console.log(`PyTorch side SKIPPED: ${found.error} (${python})`);

  const rounds = Number(flag("--rounds") ?? 2);
  const script = fileURLToPath(new URL("./allreduce_torch.py", import.meta.url));
  const dtrain = async () => {
    const port = String(freePort());
    const token = crypto.randomUUID();
    const outputs = await Promise.all(
      Array.from(
        { length: WORLD },
        (_, rank) =>
          run(Deno.execPath(), ["run", "-A", import.meta.filename!], {
            DTRAIN_BENCH_WORKER: "1",
            RANK: String(rank),
            WORLD_SIZE: String(WORLD),
            MASTER_ADDR: "127.0.0.1",
            MASTER_PORT: port,
            DTRAIN_TOKEN: token,
          }),
      ),
    );
    return lastJson(outputs[0]).rows;
  };
  const torch = async () =>
    lastJson(await run(python, [script, "--json", "--port", String(freePort())], {})).rows;
  const best = (a: Row[] | undefined, b: Row[]) =>
    a ? a.map((r, i) => ({ bytes: r.bytes, seconds: Math.min(r.seconds, b[i].seconds) })) : b;

  let ours: Row[] | undefined;
  let theirs: Row[] | undefined;
  for (let round = 0; round < rounds; round++) {
    ours = best(ours, await dtrain());
    if (withTorch) theirs = best(theirs, await torch());
  }
  if (!ours) throw new Error("--rounds must be at least 1");

  const fmtSize = (b: number) => b >= 1 << 20 ? `${b >> 20} MiB` : `${b >> 10} KiB`;
  const head = ["size", "dtrain us", "dtrain GB/s"];
  if (theirs) head.push("torch us", "torch GB/s", "dtrain/torch");
  console.log(`all-reduce (sum, f32, in place), ${WORLD} processes on 127.0.0.1, busbw in GB/s`);
  console.log(`| ${head.join(" | ")} |`);
  console.log(`|${head.map(() => "---:").join("|")}|`);
  ours.forEach((row, i) => {
    const cells = [
      fmtSize(row.bytes),
      (row.seconds * 1e6).toFixed(1),
      busbw(row.bytes, row.seconds).toFixed(3),
    ];
    if (theirs) {
      const t = theirs[i];
      cells.push(
        (t.seconds * 1e6).toFixed(1),
        busbw(t.bytes, t.seconds).toFixed(3),
        (t.seconds / row.seconds).toFixed(2) + "x",
      );
    }
    console.log(`| ${cells.join(" | ")} |`);
  });
}

if (Deno.env.get("DTRAIN_BENCH_WORKER") === "1") await worker();
else await main();
