/**
 * Chapter 4's figure: how fast a snapshot is written and read back, by size. One f32 tensor of
 * 1 to 256 MiB, written by `checkpoint.save` (a temporary file, fsync, rename, fsync of the
 * folder), by a plain `Deno.writeFile` of the same bytes (no fsync, no rename: what durability
 * costs), and read by `checkpoint.load`. The fastest of 3 tries each. Writes 04_snapshot_io.json
 * and 04_snapshot_io.svg beside this file.
 *
 *     deno run -A --v8-flags=--expose-gc docs/guide/figures/04_snapshot_io.ts [DIR]
 *
 * DIR (default a new folder under the system's temporary folder) is where the files go: measure
 * the filesystem your snapshots will live on.
 * @module
 */

import { checkpoint, zeros } from "../../../mod.ts";
import { bytesLabel, lineChart, machine } from "./_chart.ts";

const SIZES = [1 << 20, 4 << 20, 16 << 20, 64 << 20, 256 << 20];
const dir = Deno.args[0] ?? await Deno.makeTempDir({ prefix: "guide_snapshot_io_" });
const fsType = new TextDecoder().decode(
  (await new Deno.Command("df", { args: ["-T", dir], stdout: "piped" }).output()).stdout,
).trim().split("\n").at(-1)?.split(/\s+/)[1] ?? "unknown";

/** The fastest of 3 runs of `fn`, in seconds. */
function best(fn: () => void): number {
  let fastest = Infinity;
  for (let i = 0; i < 3; i++) {
    const start = performance.now();
    fn();
    fastest = Math.min(fastest, (performance.now() - start) / 1000);
  }
  return fastest;
}

const rows: {
  bytes: number;
  saveSeconds: number;
  plainWriteSeconds: number;
  loadSeconds: number;
}[] = [];
for (const bytes of SIZES) {
  const t = zeros([bytes / 4]).fill_(0.5);
  const path = `${dir}/snapshot.safetensors`;
  const save = best(() => checkpoint.save(path, { "model.weight": t }));
  const raw = new Uint8Array(t.toArray().buffer);
  const plain = best(() => Deno.writeFileSync(`${dir}/plain.bin`, raw));
  const load = best(() => checkpoint.load(path).tensors["model.weight"].dispose());
  rows.push({ bytes, saveSeconds: save, plainWriteSeconds: plain, loadSeconds: load });
  console.log(
    `${bytesLabel(bytes).padStart(7)}: save ${(bytes / save / 1e9).toFixed(2)} GB/s, ` +
      `plain write ${(bytes / plain / 1e9).toFixed(2)} GB/s, load ${
        (bytes / load / 1e9).toFixed(2)
      } GB/s`,
  );
  t.dispose();
}
if (Deno.args[0] === undefined) await Deno.remove(dir, { recursive: true });

const where = `${machine()}, ${fsType}`;
const gbs = (key: "saveSeconds" | "plainWriteSeconds" | "loadSeconds") =>
  rows.map((r) => [r.bytes, r.bytes / r[key] / 1e9] as [number, number]);
await Deno.writeTextFile(
  new URL("04_snapshot_io.json", import.meta.url),
  JSON.stringify({ machine: where, date: new Date().toISOString(), rows }, null, 2) + "\n",
);
await Deno.writeTextFile(
  new URL("04_snapshot_io.svg", import.meta.url),
  lineChart({
    title: "Writing and reading a snapshot, by size",
    xLabel: "snapshot size",
    yLabel: "GB/s",
    xTick: bytesLabel,
    series: [
      { name: "checkpoint.save (atomic)", points: gbs("saveSeconds") },
      { name: "plain write, no fsync", points: gbs("plainWriteSeconds") },
      { name: "checkpoint.load", points: gbs("loadSeconds") },
    ],
    source: `docs/guide/figures/04_snapshot_io.ts on ${where}`,
  }),
);
