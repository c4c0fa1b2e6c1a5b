/**
 * Chapter 1's figure: bus bandwidth of a 2-rank f32 all-reduce by size, over shared memory (the
 * default), over Gloo (DTRAIN_SHM=0), and of the ring of examples/01_ring_allreduce.ts over the
 * store. Writes 01_busbw.json (the numbers) and 01_busbw.svg beside this file.
 *
 *     deno run -A --v8-flags=--expose-gc docs/guide/figures/01_busbw.ts
 *
 * Timing: after a warm-up, the fastest of 3 rounds × 3 trials of N back-to-back all-reduces, N = 32 MiB /
 * size clamped to 3..200. busbw = 2(n-1)/n × bytes / time (n = 2: bytes / time).
 * @module
 */

import { dist, zeros } from "../../../mod.ts";
import { ringAllReduce } from "../examples/01_ring_allreduce.ts";
import { bytesLabel, lineChart, machine } from "./_chart.ts";

const WORLD = 2;
const SIZES = [4 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20];
const ROUNDS = 3;
const RING_SIZES = [4 << 10, 64 << 10, 256 << 10, 1 << 20];
type Kind = "shm" | "gloo" | "ring";

async function worker(kind: Kind): Promise<void> {
  await dist.initProcessGroup({ backend: "gloo", timeoutMs: 120_000 });
  const rank = dist.getRank();
  const store = await dist.StoreClient.connect({
    hostname: Deno.env.get("MASTER_ADDR")!,
    port: Number(Deno.env.get("MASTER_PORT")),
    token: Deno.env.get("DTRAIN_TOKEN")!,
    rank,
  });
  const rows: { bytes: number; seconds: number }[] = [];
  let tag = 0;
  for (const bytes of kind === "ring" ? RING_SIZES : SIZES) {
    const x = zeros([bytes / 4]).fill_(1);
    const raw = new Float32Array(bytes / 4).fill(1);
    const once = () =>
      kind === "ring"
        ? ringAllReduce(store, raw, rank, WORLD, `bench/${tag++}`)
        : dist.allReduce(x).then(() => {});
    const n = Math.max(3, Math.min(200, Math.floor((32 << 20) / bytes)));
    for (let i = 0; i < 3; i++) await once();
    let best = Infinity;
    for (let t = 0; t < 3; t++) {
      await dist.barrier();
      const start = performance.now();
      for (let i = 0; i < n; i++) await once();
      best = Math.min(best, (performance.now() - start) / 1000 / n);
    }
    rows.push({ bytes, seconds: best });
    x.dispose();
  }
  if (rank === 0) console.log(JSON.stringify(rows));
  store.close();
  await dist.destroyProcessGroup();
}

async function measure(kind: Kind): Promise<{ bytes: number; seconds: number }[]> {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = String(l.addr.port);
  l.close();
  const token = crypto.randomUUID();
  const outs = await Promise.all(Array.from({ length: WORLD }, async (_, rank) => {
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", "--v8-flags=--expose-gc", import.meta.filename!, kind],
      env: {
        RANK: String(rank),
        WORLD_SIZE: String(WORLD),
        MASTER_ADDR: "127.0.0.1",
        MASTER_PORT: port,
        DTRAIN_TOKEN: token,
        DTRAIN_NUM_THREADS: "1",
        DTRAIN_SHM: kind === "shm" ? "1" : "0",
      },
      stderr: "inherit",
    }).output();
    if (!out.success) throw new Error(`${kind} rank ${rank} exited ${out.code}`);
    return new TextDecoder().decode(out.stdout);
  }));
  return JSON.parse(outs[0].trim().split("\n").at(-1)!);
}

if (Deno.args.length === 1) {
  await worker(Deno.args[0] as Kind);
} else {
  const names: Record<Kind, string> = {
    shm: "shared memory",
    gloo: "Gloo (DTRAIN_SHM=0)",
    ring: "ring over the store",
  };
  const results: Record<string, { bytes: number; seconds: number; busbwGBs: number }[]> = {};
  // Rounds alternate the kinds, so that load from other processes hurts each alike; the fastest
  // round counts.
  const best: Record<string, { bytes: number; seconds: number }[]> = {};
  for (let round = 0; round < ROUNDS; round++) {
    for (const kind of ["shm", "gloo", "ring"] as Kind[]) {
      const rows = await measure(kind);
      best[kind] = rows.map((r, i) => ({
        ...r,
        seconds: Math.min(r.seconds, best[kind]?.[i].seconds ?? Infinity),
      }));
    }
  }
  for (const kind of ["shm", "gloo", "ring"] as Kind[]) {
    results[kind] = best[kind].map((r) => ({
      ...r,
      busbwGBs: 2 * (WORLD - 1) / WORLD * r.bytes / r.seconds / 1e9,
    }));
    for (const r of results[kind]) {
      console.log(
        `${names[kind].padEnd(22)} ${bytesLabel(r.bytes).padStart(7)} ` +
          `${(r.seconds * 1e6).toFixed(1).padStart(10)} us ${r.busbwGBs.toFixed(3)} GB/s`,
      );
    }
  }
  const where = machine();
  const dir = new URL("./", import.meta.url);
  Deno.writeTextFileSync(
    new URL("01_busbw.json", dir),
    JSON.stringify({ machine: where, date: new Date().toISOString(), results }, null, 2) + "\n",
  );
  Deno.writeTextFileSync(
    new URL("01_busbw.svg", dir),
    lineChart({
      title: "All-reduce bus bandwidth, f32 sum, 2 ranks on one host",
      xLabel: "tensor size",
      yLabel: "busbw (GB/s)",
      xTick: bytesLabel,
      series: (["shm", "gloo", "ring"] as Kind[]).map((k) => ({
        name: names[k],
        points: results[k].map((r) => [r.bytes, r.busbwGBs] as [number, number]),
      })),
      source: `docs/guide/figures/01_busbw.ts on ${where}`,
    }),
  );
}
