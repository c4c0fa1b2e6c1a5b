/**
 * Chapter 6's figure: the bus bandwidth of an all-reduce within one node (2 ranks over shared
 * memory) and across two nodes (4 ranks, shared memory within each node and Gloo over the veth
 * pair between them), from docs/guide/examples/06_two_nodes.ts at 1, 4 and 16 MiB, the best of 3
 * runs each. Needs root (network namespaces). Writes 06_bandwidth.svg and 06_bandwidth.json.
 *
 *     deno run -A docs/guide/figures/06_bandwidth.ts
 * @module
 */

import { type Bar, barChart, runJson } from "./_bars.ts";
import { machine } from "./_chart.ts";

interface Result {
  mib: number;
  within: number;
  across: number;
}

const results: Result[] = [];
for (const mib of [1, 4, 16]) {
  let best: Result = { mib, within: 0, across: 0 };
  for (let round = 0; round < 3; round++) {
    const r = await runJson([
      "run",
      "-A",
      "--v8-flags=--expose-gc",
      "docs/guide/examples/06_two_nodes.ts",
      String(mib),
    ]) as Result;
    best = {
      mib,
      within: Math.max(best.within, r.within),
      across: Math.max(best.across, r.across),
    };
  }
  results.push(best);
}
const bars: Bar[] = results.flatMap((r) => [
  { label: `${r.mib} MiB, within a node (shm)`, value: r.within },
  { label: `${r.mib} MiB, across 2 nodes`, value: r.across },
]);
const here = new URL("./", import.meta.url);
const caption = `docs/guide/figures/06_bandwidth.ts on ${machine()}, ${
  new Date().toISOString().slice(0, 10)
}; best of 3 runs`;
Deno.writeTextFileSync(
  new URL("06_bandwidth.svg", here),
  barChart(bars, { title: "All-reduce bus bandwidth, f32", unit: "GB/s", caption, digits: 2 }),
);
Deno.writeTextFileSync(
  new URL("06_bandwidth.json", here),
  JSON.stringify({ caption, results }, null, 2) + "\n",
);
for (const b of bars) console.log(`${b.label}: ${b.value.toFixed(2)} GB/s`);
