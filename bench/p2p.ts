/**
 * Point-to-point benchmark: the round trip of a blocking ping-pong (rank 0 `send`s then `recv`s,
 * rank 1 the reverse) between two processes on 127.0.0.1, f32 tensors of 4 KiB ... 16 MiB, over
 * dtrain's shared-memory transport, over its Gloo transport (DTRAIN_SHM=0) and over
 * torch.distributed's Gloo (bench/p2p_torch.py) when a PyTorch Python is available.
 *
 *     deno run -A bench/p2p.ts [--rounds 2] [--python PYTHON] [--no-torch]
 *
 * `DTRAIN_BENCH_GLOO_BEFORE=<path of another libdtrain_gloo.so>` adds a fourth side, Gloo on that
 * build (an earlier commit's), for before/after numbers in the same run.
 *
 * Every side uses the same sizes, iteration counts, warm-up and timing rule: the fastest of 5
 * trials of back-to-back round trips, and the fastest over `--rounds` runs (default 2) that
 * alternate the sides, so that load from other processes on the machine hurts all alike.
 * @module
 */

import { fileURLToPath } from "node:url";
import {
  barrier,
  destroyProcessGroup,
  initProcessGroup,
  recv,
  send,
} from "../src/distributed/mod.ts";
import { ones, zeros } from "../src/tensor/creation.ts";
import { findTorch, freePort, lastJsonLine } from "./runner.ts";

const SIZES = [4 << 10, 64 << 10, 1 << 20, 16 << 20];
const TRIALS = 5;

interface Row {
  bytes: number;
  seconds: number;
}

/** About 64 MiB each way per trial, 10..1000 round trips (same rule as the Python twin). */
function iterations(bytes: number): number {
  return Math.max(10, Math.min(1000, Math.floor((64 << 20) / bytes)));
}

async function worker(): Promise<void> {
  const group = await initProcessGroup({ timeoutMs: 120_000 });
  const peer = 1 - group.rank;
  const rows: Row[] = [];
  for (const bytes of SIZES) {
    const out = ones([bytes / 4]), box = zeros([bytes / 4]);
    const trip = group.rank === 0
      ? () => (send(out, peer), recv(box, peer))
      : () => (recv(box, peer), send(out, peer));
    const n = iterations(bytes);
    for (let i = 0; i < Math.min(n, 20); i++) trip();
    const trials: number[] = [];
    for (let t = 0; t < TRIALS; t++) {
      await barrier();
      const start = performance.now();
      for (let i = 0; i < n; i++) trip();
      trials.push((performance.now() - start) / 1000 / n);
    }
    rows.push({ bytes, seconds: Math.min(...trials) });
    out.dispose();
    box.dispose();
  }
  if (group.rank === 0) console.log(JSON.stringify({ rows }));
  await destroyProcessGroup();
}

async function run(cmd: string, args: string[], env: Record<string, string>): Promise<Row[]> {
  const out = await new Deno.Command(cmd, { args, env, stderr: "inherit" }).output();
  if (!out.success) throw new Error(`${cmd} ${args.join(" ")} exited ${out.code}`);
  const result = lastJsonLine(new TextDecoder().decode(out.stdout));
  if (result === undefined) throw new Error(`${cmd}: no JSON result`);
  return result.rows as Row[];
}

/** Both ranks of dtrain's ping-pong; rank 0's rows. */
async function dtrain(env: Record<string, string>): Promise<Row[]> {
  const port = String(freePort()), token = crypto.randomUUID();
  const sides = [0, 1].map((rank) =>
    run(Deno.execPath(), ["run", "-A", import.meta.filename!], {
      ...env,
      DTRAIN_BENCH_WORKER: "1",
      RANK: String(rank),
      WORLD_SIZE: "2",
      MASTER_ADDR: "127.0.0.1",
      MASTER_PORT: port,
      DTRAIN_TOKEN: token,
    }).catch((err) => rank === 0 ? Promise.reject(err) : [])
  );
  return (await Promise.all(sides))[0];
}

async function main(): Promise<void> {
  const args = Deno.args;
  const flag = (name: string) => {
    const i = args.indexOf(name);
    return i >= 0 ? args[i + 1] : undefined;
  };
  const found = args.includes("--no-torch") ? undefined : await findTorch(flag("--python"));
  if (found && "error" in found) console.log(`PyTorch side SKIPPED: ${found.error}`);
  const script = fileURLToPath(new URL("./p2p_torch.py", import.meta.url));
  const sides: Record<string, () => Promise<Row[]>> = {
    "dtrain shm": () => dtrain({}),
    "dtrain gloo": () => dtrain({ DTRAIN_SHM: "0" }),
  };
  const before = Deno.env.get("DTRAIN_BENCH_GLOO_BEFORE");
  if (before) sides["gloo before"] = () => dtrain({ DTRAIN_SHM: "0", DTRAIN_GLOO_LIB: before });
  if (found && "version" in found) {
    sides.torch = () => run(found.python, [script, "--port", String(freePort())], {});
  }
  const best: Record<string, Row[]> = {};
  const rounds = Number(flag("--rounds") ?? 2);
  for (let round = 0; round < rounds; round++) {
    const names = Object.keys(sides);
    for (const name of round % 2 ? names.reverse() : names) {
      const rows = await sides[name]();
      best[name] =
        best[name]?.map((r, i) => ({ ...r, seconds: Math.min(r.seconds, rows[i].seconds) })) ??
          rows;
    }
  }
  const us = (s: number) => (s * 1e6).toFixed(1);
  const head = ["size", ...Object.keys(best).map((n) => `${n} µs`)];
  if (best.torch) head.push("gloo/torch", "shm/torch");
  console.log("blocking send/recv ping-pong, 2 processes on 127.0.0.1, round trip (fastest trial)");
  console.log(`| ${head.join(" | ")} |\n|${head.map(() => "---:").join("|")}|`);
  SIZES.forEach((bytes, i) => {
    const cells = [bytes >= 1 << 20 ? `${bytes >> 20} MiB` : `${bytes >> 10} KiB`];
    for (const name of Object.keys(best)) cells.push(us(best[name][i].seconds));
    if (best.torch) {
      const t = best.torch[i].seconds;
      cells.push(
        `${(best["dtrain gloo"][i].seconds / t).toFixed(2)}×`,
        `${(best["dtrain shm"][i].seconds / t).toFixed(2)}×`,
      );
    }
    console.log(`| ${cells.join(" | ")} |`);
  });
}

if (Deno.env.get("DTRAIN_BENCH_WORKER") === "1") await worker();
else await main();
