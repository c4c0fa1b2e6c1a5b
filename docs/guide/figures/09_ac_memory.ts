/**
 * Chapter 9's figure: the activation memory one GPT forward leaves for backward (4 blocks, width
 * 64, batch 4) with no activation checkpointing, selective (every second block) and full, at
 * block sizes 64, 128 and 256. It runs docs/guide/examples/09_checkpoint.ts once per block size
 * and writes 09_ac_memory.svg and 09_ac_memory.json beside itself.
 *
 *     deno run -A docs/guide/figures/09_ac_memory.ts
 * @module
 */

import { type Bar, barChart, launchJson } from "./_bars.ts";
import { machine, writeFigure } from "./_chart.ts";

interface Run {
  mode: string;
  held: number;
}

const MiB = 2 ** 20;
const sizes = [64, 128, 256];
const results: { blockSize: number; runs: Run[] }[] = [];
for (const blockSize of sizes) {
  const out = await launchJson(1, "docs/guide/examples/09_checkpoint.ts", [
    `--block-size=${blockSize}`,
    "--json",
  ]) as { runs: Run[] };
  results.push({ blockSize, runs: out.runs });
}
const bars: Bar[] = [];
for (const { blockSize, runs } of results) {
  for (const r of runs) {
    bars.push({
      label: `block ${blockSize}, ${r.mode}`,
      value: r.held / MiB,
      note: r.mode === "none" ? undefined : `(${(r.held / runs[0].held).toFixed(2)}×)`,
    });
  }
}
const here = new URL("./", import.meta.url);
const caption = `docs/guide/figures/09_ac_memory.ts on ${machine()}, ${
  new Date().toISOString().slice(0, 10)
}`;
await writeFigure(
  new URL("09_ac_memory.svg", here),
  barChart(bars, {
    title: "Activations held for backward, GPT of 4 blocks, width 64, batch 4",
    unit: "MiB",
    caption,
    digits: 2,
  }),
);
await writeFigure(
  new URL("09_ac_memory.json", here),
  JSON.stringify({ caption, results }, null, 2) + "\n",
);
for (const b of bars) console.log(`${b.label}: ${b.value.toFixed(2)} MiB ${b.note ?? ""}`);
