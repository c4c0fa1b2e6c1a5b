/**
 * Chapter 5's figure: the bytes each rank keeps between steps (parameters, gradients, AdamW's two
 * moments) and the native memory live after forward, for DDP and FSDP at 2 and 4 ranks, on the GPT
 * of `make bench`'s FSDP section (4 blocks, width 128). It runs docs/guide/examples/05_fsdp_memory.ts
 * once per strategy and world size and writes 05_memory.svg and 05_memory.json beside itself.
 *
 *     deno run -A docs/guide/figures/05_memory.ts
 * @module
 */

import { type Bar, barChart, launchJson } from "./_bars.ts";
import { machine } from "./_chart.ts";

interface Result {
  strategy: string;
  full: number;
  local: number;
  bytes: number;
  afterForward: number;
}

const MiB = 2 ** 20;
const runs: { worldSize: number; result: Result }[] = [];
for (const worldSize of [2, 4]) {
  for (const strategy of ["ddp", "fsdp"]) {
    const out = await launchJson(worldSize, "docs/guide/examples/05_fsdp_memory.ts", [
      "--n-layer=4",
      "--n-embd=128",
      `--strategy=${strategy}`,
      "--json",
    ]) as { results: Result[] };
    runs.push({ worldSize, result: out.results[0] });
  }
}
const bars: Bar[] = [];
for (const { worldSize, result: r } of runs) {
  const ddp = runs.find((x) => x.worldSize === worldSize && x.result.strategy === "ddp")!.result;
  bars.push({
    label: `${r.strategy} × ${worldSize}: state`,
    value: r.bytes / MiB,
    note: `(${(100 * r.bytes / ddp.bytes).toFixed(0)}%)`,
  });
  bars.push({ label: `${r.strategy} × ${worldSize}: after forward`, value: r.afterForward / MiB });
}
const here = new URL("./", import.meta.url);
const caption = `docs/guide/figures/05_memory.ts on ${machine()}, ${
  new Date().toISOString().slice(0, 10)
}`;
Deno.writeTextFileSync(
  new URL("05_memory.svg", here),
  barChart(bars, {
    title: `Memory per rank, GPT of ${(runs[0].result.full / 1e6).toFixed(2)} M parameters`,
    unit: "MiB",
    caption,
    digits: 2,
  }),
);
Deno.writeTextFileSync(
  new URL("05_memory.json", here),
  JSON.stringify({ caption, runs }, null, 2) + "\n",
);
for (const b of bars) console.log(`${b.label}: ${b.value.toFixed(2)} MiB ${b.note ?? ""}`);
