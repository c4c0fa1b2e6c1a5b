/**
 * Chapter 3's figures: two steps of each version of the data-parallel loop on 2 ranks, as
 * timelines (03_trace_manual.svg, 03_trace_ddp.svg, 03_trace_ddp_buckets.svg), and each version's
 * exposed communication per step in 03_traces.json. An MLP of 6 hidden layers of 512 (1.6 M
 * parameters, 6.3 MB of gradients), batches of 64 per rank, 12 steps.
 *
 *     deno run -A docs/guide/figures/03_traces.ts
 * @module
 */

import { fileURLToPath } from "node:url";
import { profile } from "../../../mod.ts";
import { machine } from "./_chart.ts";

const root = fileURLToPath(new URL("../../../", import.meta.url));
const SIZE = ["--width", "512", "--layers", "6", "--steps", "12", "--batch", "64", "--no-check"];
const VERSIONS = [
  { name: "manual", file: "03_manual_dp.ts", args: [] },
  { name: "ddp", file: "03_ddp.ts", args: [] },
  {
    name: "ddp_buckets",
    file: "03_ddp.ts",
    args: ["--first-bucket-mb", "1", "--bucket-cap-mb", "1"],
  },
];

const tmp = await Deno.makeTempDir({ prefix: "guide_traces_" });
const results: Record<string, string> = {};
for (const v of VERSIONS) {
  const trace = `${tmp}/${v.name}.json`;
  const out = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      "--v8-flags=--expose-gc",
      "src/launch/main.ts",
      "--nproc-per-node",
      "2",
      `docs/guide/examples/${v.file}`,
      ...SIZE,
      ...v.args,
    ],
    cwd: root,
    env: { DTRAIN_PROFILE: trace, NO_COLOR: "1" },
    stderr: "inherit",
  }).output();
  const text = new TextDecoder().decode(out.stdout);
  if (!out.success) throw new Error(`${v.name} exited ${out.code}:\n${text}`);
  const line = text.split("\n").find((l) => l.startsWith("[rank 0] ") && /exposed/.test(l));
  results[v.name] = line?.slice("[rank 0] ".length) ?? "(no line)";
  console.log(`${v.name}: ${results[v.name]}`);
  const events = JSON.parse(await Deno.readTextFile(trace));
  const svg = profile.renderSvg(events.traceEvents ?? events, { lastSteps: 2 });
  await Deno.writeTextFile(new URL(`03_trace_${v.name}.svg`, import.meta.url), svg);
}
await Deno.writeTextFile(
  new URL("03_traces.json", import.meta.url),
  JSON.stringify({ machine: machine(), date: new Date().toISOString(), results }, null, 2) + "\n",
);
await Deno.remove(tmp, { recursive: true });
