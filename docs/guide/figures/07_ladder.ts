/**
 * Chapter 7's worked example as a figure: milliseconds per step of the GPT (4 blocks, width 128)
 * on 2 ranks, from one all-reduce per parameter over Gloo to dtrain's DDP over shared memory. It
 * runs docs/guide/examples/07_ladder.ts over Gloo (DTRAIN_SHM=0) and over shared memory, 3 rounds
 * each, alternating, and keeps each variant's best round (the least disturbed by other jobs).
 * Writes 07_ladder.svg and 07_ladder.json beside itself.
 *
 *     deno run -A docs/guide/figures/07_ladder.ts
 * @module
 */

import { type Bar, barChart, launchJson } from "./_bars.ts";
import { machine } from "./_chart.ts";

interface Run {
  backend: string;
  results: { variant: string; ms: number }[];
}

const best = new Map<string, number>();
for (let round = 0; round < 3; round++) {
  for (const shm of ["0", "1"]) {
    const run = await launchJson(2, "docs/guide/examples/07_ladder.ts", [
      "--n-layer=4",
      "--n-embd=128",
      "--steps=10",
    ], { DTRAIN_SHM: shm }) as Run;
    for (const r of run.results) {
      const key = `${r.variant} over ${run.backend}`;
      best.set(key, Math.min(best.get(key) ?? Infinity, r.ms));
    }
  }
}
const ladder = [
  ["perParameter over gloo", "1. all-reduce per parameter, Gloo"],
  ["perParameter over shm", "2. ... over shared memory"],
  ["flat over shm", "3. one flat all-reduce, shm"],
  ["ddp over shm", "4. DDP: buckets overlapped, shm"],
  ["ddp over gloo", "(DDP over Gloo)"],
];
const bars: Bar[] = ladder.map(([key, label]) => ({ label, value: best.get(key)! }));
const here = new URL("./", import.meta.url);
const caption = `docs/guide/figures/07_ladder.ts on ${machine()}, ${
  new Date().toISOString().slice(0, 10)
}; median step of 10, best of 3 rounds`;
Deno.writeTextFileSync(
  new URL("07_ladder.svg", here),
  barChart(bars, { title: "GPT step on 2 ranks (lower is better)", unit: "ms", caption }),
);
Deno.writeTextFileSync(
  new URL("07_ladder.json", here),
  JSON.stringify({ caption, best: Object.fromEntries(best) }, null, 2) + "\n",
);
for (const b of bars) console.log(`${b.label}: ${b.value.toFixed(1)} ms`);
