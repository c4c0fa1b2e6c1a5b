/**
 * Draws a trace (the merged Chrome trace of tracer.ts and merge.ts) as an SVG timeline: two rows
 * per rank (main and comm), one colour per kind of work, a millisecond axis. It is how the
 * README's picture was made, and a quick look at a run without Perfetto:
 *
 *     deno run -A src/profile/svg.ts TRACE.json OUT.svg [--last-steps N]
 * @module
 */

import type { TraceEvent } from "./tracer.ts";
import { writeTextFileAtomic } from "../io/private_files.ts";

/** Options of {@linkcode renderSvg}. */
export interface RenderOptions {
  /** Show only the last N steps (N "backward" spans of the lowest rank); default all. */
  lastSteps?: number;
  /** Width of the drawing in pixels (default 1200). */
  width?: number;
}

const COLORS: Record<string, string> = {
  forward: "#4e79a7",
  backward: "#f28e2b",
  "optimizer step": "#59a14f",
  data: "#bab0ac",
  "wait for buckets": "#e15759",
  comm: "#b07aa1",
};

const LABEL_W = 110, ROW_H = 22, AXIS_H = 30, LEGEND_H = 26;

function colorOf(e: TraceEvent): string {
  return e.cat === "comm" ? COLORS.comm : COLORS[e.name] ?? "#76b7b2";
}

function escape(s: string): string {
  return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

/**
 * Renders `events` as an SVG document.
 *
 * @param events The trace's events (metadata events are ignored).
 * @param options Window and size.
 * @returns The SVG text.
 *
 * @example One rank, one forward
 * ```ts
 * import assert from "node:assert/strict";
 * import { renderSvg } from "./svg.ts";
 * const svg = renderSvg([{ name: "forward", cat: "compute", ph: "X", ts: 0, dur: 1000, pid: 0, tid: 0 }]);
 * assert.match(svg, /^<svg /);
 * assert.match(svg, /rank 0/);
 * ```
 */
export function renderSvg(events: readonly TraceEvent[], options: RenderOptions = {}): string {
  const width = options.width ?? 1200;
  let spans = events.filter((e) => e.ph === "X");
  if (spans.length === 0) throw new Error("renderSvg: the trace has no complete (X) events");
  const ranks = [...new Set(spans.map((e) => e.pid))].sort((a, b) => a - b);
  if (options.lastSteps) {
    const steps = spans.filter((e) => e.pid === ranks[0] && e.name === "backward")
      .sort((a, b) => a.ts - b.ts);
    const from = steps.at(-options.lastSteps)?.ts;
    if (from !== undefined) {
      // Start at the forward before the first shown backward.
      const fwd = spans.filter((e) => e.pid === ranks[0] && e.name === "forward" && e.ts < from)
        .at(-1);
      const start = (fwd?.ts ?? from) - 200;
      spans = spans.filter((e) => e.ts + (e.dur ?? 0) >= start);
    }
  }
  const t0 = Math.min(...spans.map((e) => e.ts));
  const t1 = Math.max(...spans.map((e) => e.ts + (e.dur ?? 0)));
  const plotW = width - LABEL_W - 20;
  const x = (ts: number) => LABEL_W + ((ts - t0) / Math.max(1, t1 - t0)) * plotW;
  const rowY = (rank: number, tid: number) =>
    AXIS_H + (ranks.indexOf(rank) * 2 + tid) * (ROW_H + 4);
  const height = AXIS_H + ranks.length * 2 * (ROW_H + 4) + LEGEND_H + 10;
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" ` +
    `font-family="sans-serif" font-size="11">`,
    `<rect width="100%" height="100%" fill="white"/>`,
  ];
  // The axis: about 10 ticks at a round number of milliseconds.
  const spanMs = (t1 - t0) / 1000;
  const step =
    [0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000].find((s) => spanMs / s <= 12) ?? 1000;
  for (let ms = 0; ms <= spanMs; ms += step) {
    const px = x(t0 + ms * 1000);
    out.push(
      `<line x1="${px}" y1="${AXIS_H - 6}" x2="${px}" y2="${
        height - LEGEND_H - 6
      }" stroke="#ddd"/>`,
    );
    out.push(`<text x="${px}" y="${AXIS_H - 10}" text-anchor="middle">${+ms.toFixed(1)} ms</text>`);
  }
  for (const rank of ranks) {
    for (const [tid, row] of ["main", "comm"].entries()) {
      out.push(
        `<text x="6" y="${rowY(rank, tid) + ROW_H / 2 + 4}">rank ${rank} ${row}</text>`,
      );
    }
  }
  for (const e of spans) {
    const left = x(e.ts), w = Math.max(1, x(e.ts + (e.dur ?? 0)) - left), y = rowY(e.pid, e.tid);
    const bytes = typeof e.args?.bytes === "number"
      ? ` ${(e.args.bytes / 2 ** 20).toFixed(2)} MiB`
      : "";
    out.push(
      `<rect x="${left.toFixed(1)}" y="${y}" width="${w.toFixed(1)}" height="${ROW_H}" ` +
        `fill="${colorOf(e)}" stroke="white" stroke-width="0.5"><title>${escape(e.name + bytes)} ` +
        `${((e.dur ?? 0) / 1000).toFixed(3)} ms</title></rect>`,
    );
    const label = e.name.replace("wait for buckets", "wait").replace("optimizer step", "step")
      .replace("allReduce bucket ", "AR b");
    if (w > label.length * 6.5 + 4) {
      out.push(
        `<text x="${(left + w / 2).toFixed(1)}" y="${y + ROW_H / 2 + 4}" text-anchor="middle" ` +
          `fill="white">${escape(label)}</text>`,
      );
    }
  }
  let lx = LABEL_W;
  const ly = height - LEGEND_H + 4;
  for (const [name, color] of Object.entries(COLORS)) {
    out.push(`<rect x="${lx}" y="${ly}" width="14" height="14" fill="${color}"/>`);
    out.push(
      `<text x="${lx + 18}" y="${ly + 11}">${
        name === "comm" ? "collective (comm row)" : name
      }</text>`,
    );
    lx += 40 + name.length * 7 + (name === "comm" ? 100 : 0);
  }
  out.push("</svg>");
  return out.join("\n");
}

if (import.meta.main) {
  const [input, output] = Deno.args.filter((a) => !a.startsWith("--"));
  const steps = Deno.args.find((a) => a.startsWith("--last-steps="));
  if (!input || !output) {
    console.error("usage: deno run -A src/profile/svg.ts TRACE.json OUT.svg [--last-steps=N]");
    Deno.exit(2);
  }
  const trace = JSON.parse(await Deno.readTextFile(input)) as { traceEvents: TraceEvent[] };
  const lastSteps = steps ? Number(steps.split("=")[1]) : undefined;
  writeTextFileAtomic(output, renderSvg(trace.traceEvents, { lastSteps })); // never through a link
}
