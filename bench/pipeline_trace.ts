/**
 * The pipeline's picture: one step of Schedule1F1B on 4 stages (4 ranks, 8 microbatches, the
 * pipeline section's GPT, shared memory) from a real `DTRAIN_PROFILE` run of
 * bench/pipeline_worker.ts under the launcher, drawn with src/profile/svg.ts: each rank's forward
 * (`F3 s1`) and backward (`B3 s1`) actions on its main row, its waits for a neighbour
 * (`recv ...`) between them, which are the bubble, and the messages on its comm row. Writes
 * bench/pipeline_trace.svg and bench/pipeline_trace.json (the step's busy time and bubble per
 * rank, read from the spans) beside itself.
 *
 *     deno run -A bench/pipeline_trace.ts
 * @module
 */

import { fileURLToPath } from "node:url";
import { renderSvg } from "../src/profile/svg.ts";
import type { TraceEvent } from "../src/profile/tracer.ts";
import { MODEL_ARGS } from "./pipeline_section.ts";

const root = fileURLToPath(new URL("../", import.meta.url));
const dir = await Deno.makeTempDir({ prefix: "dtrain-pipeline-trace-" });
try {
  const out = await new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      "--v8-flags=--expose-gc",
      "src/launch/main.ts",
      "--nproc-per-node",
      "4",
      "bench/pipeline_worker.ts",
      "--schedule=1f1b",
      ...MODEL_ARGS,
      "--steps=2",
      "--warmup=1",
    ],
    cwd: root,
    env: { DTRAIN_PROFILE: `${dir}/trace.json`, DTRAIN_SHM: "1", NO_COLOR: "1" },
    stdout: "piped",
    stderr: "inherit",
  }).output();
  if (!out.success) throw new Error(new TextDecoder().decode(out.stdout));
  const parsed = JSON.parse(await Deno.readTextFile(`${dir}/trace.json`));
  const events: TraceEvent[] = (parsed.traceEvents ?? parsed).filter((e: TraceEvent) =>
    e.ph === "X"
  );
  // The last step: from rank 0's last first forward to the last rank's last optimizer step.
  const last = (pid: number, name: string) =>
    events.filter((e) => e.pid === pid && e.name === name).sort((a, b) => a.ts - b.ts).at(-1)!;
  const ranks = [...new Set(events.map((e) => e.pid))].sort((a, b) => a - b);
  const start = last(0, "F0 s0").ts;
  const end = Math.max(...ranks.map((r) => {
    const e = last(r, "optimizer step");
    return e.ts + (e.dur ?? 0);
  }));
  const shown = events.filter((e) => e.ts >= start - 300 && e.ts + (e.dur ?? 0) <= end);
  const step = ranks.map((r) => {
    const actions = shown.filter((e) => e.pid === r && /^[FB]\d+ s\d+$/.test(e.name));
    const busy = actions.reduce((s, e) => s + (e.dur ?? 0), 0);
    const waits = shown.filter((e) => e.pid === r && e.cat === "wait");
    return {
      rank: r,
      actions: actions.length,
      busyMs: busy / 1000,
      waitMs: waits.reduce((s, e) => s + (e.dur ?? 0), 0) / 1000,
      optimizerMs: (last(r, "optimizer step").dur ?? 0) / 1000,
      stepMs: (end - start) / 1000,
      bubble: 1 - busy / (end - start),
    };
  });
  // renderSvg colours spans by name ("forward", "backward", "wait for buckets"); the pipeline's
  // actions are named per microbatch, so they are recoloured here by their title.
  const colour: [RegExp, string][] = [
    [/^F\d+ s\d+ /, "#4e79a7"],
    [/^B\d+ s\d+ /, "#f28e2b"],
    [/^recv /, "#e15759"],
  ];
  const svg = renderSvg(shown, { width: 1400 })
    .replace(/fill="#76b7b2"([^>]*)><title>([^<]*)</g, (all, rest: string, title: string) => {
      const hit = colour.find(([re]) => re.test(title));
      return hit ? `fill="${hit[1]}"${rest}><title>${title}<` : all;
    })
    .replace(">wait for buckets<", ">recv wait<");
  await Deno.writeTextFile(new URL("pipeline_trace.svg", import.meta.url), svg);
  const summary = { date: new Date().toISOString(), schedule: "1f1b", stages: 4, step };
  await Deno.writeTextFile(
    new URL("pipeline_trace.json", import.meta.url),
    JSON.stringify(summary, null, 2) + "\n",
  );
  for (const s of step) {
    console.log(
      `rank ${s.rank}: ${s.actions} actions, busy ${s.busyMs.toFixed(1)} ms of ` +
        `${s.stepMs.toFixed(1)} ms, waits ${s.waitMs.toFixed(1)} ms, optimizer ${
          s.optimizerMs.toFixed(1)
        } ms, bubble ${(s.bubble * 100).toFixed(0)}%`,
    );
  }
} finally {
  await Deno.remove(dir, { recursive: true });
}
