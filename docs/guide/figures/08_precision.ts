/**
 * Chapter 8's figure: FSDP on 2 emulated devices (emu:0, emu:1), the GPT of 4 blocks and width
 * 128, with f32 and with bf16 parameters (`mpPolicy: { paramDtype: "bf16" }`): the bytes each rank
 * gathers and reduce-scatters per step (exact) and the milliseconds per step (measured, the best of
 * 3 runs). It runs docs/guide/examples/08_emu_fsdp.ts and writes 08_precision.svg and
 * 08_precision.json beside itself.
 *
 *     deno run -A docs/guide/figures/08_precision.ts
 * @module
 */

import { type Bar, barChart, launchJson } from "./_bars.ts";
import { machine } from "./_chart.ts";

interface Result {
  paramDtype: string;
  allGatherBytes: number;
  reduceScatterBytes: number;
  stepMs: number;
}

const best = new Map<string, Result>();
for (let round = 0; round < 3; round++) {
  const out = await launchJson(2, "docs/guide/examples/08_emu_fsdp.ts", [
    "--n-layer=4",
    "--n-embd=128",
    "--steps=6",
  ]) as { results: Result[] };
  for (const r of out.results) {
    const old = best.get(r.paramDtype);
    if (!old || r.stepMs < old.stepMs) best.set(r.paramDtype, r);
  }
}
const MiB = 2 ** 20;
const bars: Bar[] = [];
for (const r of best.values()) {
  bars.push({
    label: `${r.paramDtype}: bytes a step`,
    value: (r.allGatherBytes + r.reduceScatterBytes) / MiB,
    note: "MiB",
  });
}
for (const r of best.values()) {
  bars.push({ label: `${r.paramDtype}: step`, value: r.stepMs, note: "ms" });
}
const here = new URL("./", import.meta.url);
const caption = `docs/guide/figures/08_precision.ts on ${machine()}, ${
  new Date().toISOString().slice(0, 10)
}; best of 3 runs`;
Deno.writeTextFileSync(
  new URL("08_precision.svg", here),
  barChart(bars, {
    title: "FSDP on 2 emu devices: f32 against bf16 parameters",
    unit: "",
    caption,
    digits: 2,
  }),
);
Deno.writeTextFileSync(
  new URL("08_precision.json", here),
  JSON.stringify({ caption, results: [...best.values()] }, null, 2) + "\n",
);
for (const b of bars) console.log(`${b.label}: ${b.value.toFixed(2)} ${b.note}`);
