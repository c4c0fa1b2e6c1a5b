/**
 * Chapter 2's figure: how long a job takes to come together, by world size and transport. For
 * 2, 4 and 8 processes on this machine (rank 0 hosting the store, no launcher), each over shared
 * memory and over Gloo (DTRAIN_SHM=0): the time from spawning the processes to every rank holding
 * a connected group (Deno's start and dtrain's import included: the max over ranks), and the
 * time `initProcessGroup` itself took on the rank that called it last (the rendezvous proper: the
 * min over ranks). The fastest of 3 tries. Writes 02_rendezvous.json and .svg beside this file.
 *
 *     deno run -A docs/guide/figures/02_rendezvous.ts
 * @module
 */

import { dist, tensor } from "../../../mod.ts";
import { lineChart, machine, writeFigure } from "./_chart.ts";

const WORLDS = [2, 4, 8];
const TRIES = 3;

if (Deno.env.get("RANK") !== undefined) {
  const t0 = Number(Deno.env.get("GUIDE_SPAWNED_AT"));
  const start = Date.now();
  await dist.initProcessGroup({ backend: "gloo" });
  const ready = Date.now();
  const total = tensor([ready - t0]), init = tensor([ready - start]);
  await dist.allReduce(total, "max");
  await dist.allReduce(init, "min");
  if (dist.getRank() === 0) console.log(JSON.stringify({ total: total.item(), init: init.item() }));
  await dist.destroyProcessGroup();
} else {
  const results: Record<string, { world: number; totalMs: number; initMs: number }[]> = {};
  for (const shm of ["1", "0"]) {
    const kind = shm === "1" ? "shm" : "gloo";
    results[kind] = [];
    for (const world of WORLDS) {
      let best = { totalMs: Infinity, initMs: Infinity };
      for (let t = 0; t < TRIES; t++) {
        const r = await job(world, shm);
        best = { totalMs: Math.min(best.totalMs, r.total), initMs: Math.min(best.initMs, r.init) };
      }
      results[kind].push({ world, ...best });
      console.log(
        `${kind} ${world} ranks: ready ${best.totalMs} ms after spawn, init ${best.initMs} ms`,
      );
    }
  }
  const where = machine();
  const dir = new URL("./", import.meta.url);
  await writeFigure(
    new URL("02_rendezvous.json", dir),
    JSON.stringify({ machine: where, date: new Date().toISOString(), results }, null, 2) + "\n",
  );
  const series = (kind: string, key: "totalMs" | "initMs", name: string) => ({
    name,
    points: results[kind].map((r) => [r.world, r[key]] as [number, number]),
  });
  await writeFigure(
    new URL("02_rendezvous.svg", dir),
    lineChart({
      title: "From spawning the ranks to a connected process group",
      xLabel: "world size (processes on one 2-core machine)",
      yLabel: "milliseconds",
      series: [
        series("shm", "totalMs", "spawn → ready, shm"),
        series("gloo", "totalMs", "spawn → ready, Gloo"),
        series("shm", "initMs", "rendezvous, shm"),
        series("gloo", "initMs", "rendezvous, Gloo"),
      ],
      source: `docs/guide/figures/02_rendezvous.ts on ${where}`,
    }),
  );
}

/** Starts `world` copies of this script as ranks; rank 0's JSON line. */
async function job(world: number, shm: string): Promise<{ total: number; init: number }> {
  const l = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = String(l.addr.port);
  l.close();
  const env = {
    WORLD_SIZE: String(world),
    MASTER_ADDR: "127.0.0.1",
    MASTER_PORT: port,
    DTRAIN_TOKEN: crypto.randomUUID(),
    DTRAIN_SHM: shm,
    GUIDE_SPAWNED_AT: String(Date.now()),
  };
  const outs = await Promise.all(Array.from({ length: world }, async (_, rank) => {
    const out = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", import.meta.filename!],
      env: { ...env, RANK: String(rank) },
      stderr: "inherit",
    }).output();
    if (!out.success) throw new Error(`rank ${rank} of ${world} exited ${out.code}`);
    return new TextDecoder().decode(out.stdout);
  }));
  return JSON.parse(outs[0].trim().split("\n").at(-1)!);
}
