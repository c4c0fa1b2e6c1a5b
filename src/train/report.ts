/**
 * `report.html`: one self-contained page per run with its loss, accuracy, throughput and
 * gradient-norm curves and its configuration. The charts are drawn by uPlot (MIT, from npm,
 * copied into `_uplot/` by scripts/vendor_uplot.sh), inlined with the data, so the page opens
 * from disk with no network.
 * @module
 */

import { applyingSettings } from "./_report_config.ts";
import type { TrainConfig } from "./config.ts";
import type { MetricRecord } from "./metrics.ts";

/** uPlot's script and stylesheet, as text. */
export interface ReportAssets {
  script: string;
  style: string;
}

/** Reads uPlot from beside this file: from disk in a checkout, over HTTP from JSR. */
export async function loadReportAssets(): Promise<ReportAssets> {
  const read = async (name: string) => {
    const url = new URL(`./_uplot/${name}`, import.meta.url);
    const response = await fetch(url);
    if (!response.ok) throw new Error(`report: cannot read ${url}: HTTP ${response.status}`);
    return await response.text();
  };
  const [script, style] = await Promise.all([read("uPlot.iife.min.js"), read("uPlot.min.css")]);
  return { script, style };
}

/** One chart: an x axis and its series, aligned (null where a series has no point). */
interface Chart {
  id: string;
  title: string;
  xLabel: string;
  yLabel: string;
  x: number[];
  series: { label: string; color: string; values: (number | null)[]; points: boolean }[];
  /** Shown instead of the chart when it has no data. */
  empty: string;
  /** Whether the page shows it without data (a run in progress), or only once it has some. */
  always: boolean;
}

/** Aligns `(x, y)` series on the union of their x values; a series with no point is left out. */
function align(
  lines: { label: string; color: string; points: boolean; data: [number, number][] }[],
): Pick<Chart, "x" | "series"> {
  const x = [...new Set(lines.flatMap((l) => l.data.map(([v]) => v)))].sort((a, b) => a - b);
  const series = lines.filter((l) => l.data.length > 0).map(({ label, color, points, data }) => {
    const at = new Map(data);
    return { label, color, points, values: x.map((v) => at.get(v) ?? null) };
  });
  return { x, series };
}

/** The charts with data, or shown until they have some (`always`). */
function charts(records: readonly MetricRecord[], config: TrainConfig): Chart[] {
  return allCharts(records, config).filter((c) => c.always || c.x.length > 0);
}

function allCharts(records: readonly MetricRecord[], config: TrainConfig): Chart[] {
  const steps = records.filter((r) => r.kind === "step");
  const epochs = records.filter((r) => r.kind === "epoch");
  // An iteration-based run's estimate_loss of both splits, every eval_interval iterations.
  const evals = records.filter((r) => r.kind === "eval");
  const estimate = (label: string, color: string, pick: (r: MetricRecord) => unknown) => ({
    label,
    color,
    points: true,
    data: evals.flatMap((r): [number, number][] => {
      const value = pick(r);
      return typeof value === "number" ? [[r.step, value]] : [];
    }),
  });
  const tested = epochs.filter((r) => typeof r.testAccuracy === "number");
  const rate = (steps.length ? steps : epochs).map((r): [number, number] => [
    r.step,
    r.samplesPerSecond,
  ]);
  return [{
    id: "loss",
    title: "Training loss",
    xLabel: "step",
    yLabel: "loss",
    empty: "no step finished yet",
    always: true,
    ...align([
      {
        label: "logged steps",
        color: "#1f77b4",
        points: false,
        data: steps.map((r) => [r.step, r.loss]),
      },
      {
        label: "epoch mean",
        color: "#d62728",
        points: true,
        data: epochs.map((r) => [r.step, r.loss]),
      },
      {
        label: "validation",
        color: "#ff7f0e",
        points: true,
        data: epochs.filter((r) => typeof r.validationLoss === "number")
          .map((r) => [r.step, r.validationLoss as number]),
      },
      ...(evals.length === 0 ? [] : [
        estimate("train (estimate_loss)", "#2ca02c", (r) => r.trainLoss),
        estimate("validation (estimate_loss)", "#8c564b", (r) => r.validationLoss),
      ]),
    ]),
  }, {
    id: "accuracy",
    title: "Test accuracy",
    xLabel: "epoch",
    yLabel: "accuracy (%)",
    empty: "no epoch finished yet",
    // Only Fashion-MNIST has a test set: other runs never fill this chart.
    always: config.dataset === "fashion-mnist",
    ...align([{
      label: "test accuracy",
      color: "#2ca02c",
      points: true,
      data: tested.map((r) => [r.epoch, 100 * (r.testAccuracy as number)]),
    }]),
  }, {
    id: "throughput",
    title: "Throughput",
    xLabel: "step",
    yLabel: "samples/s",
    empty: "no step finished yet",
    always: true,
    ...align([{ label: "samples/s (all ranks)", color: "#9467bd", points: false, data: rate }]),
  }, {
    id: "gradnorm",
    title: "Gradient norm",
    xLabel: "step",
    yLabel: "L2 norm",
    empty: "no step logged yet",
    always: false,
    ...align([{
      label: "gradient norm",
      color: "#ff7f0e",
      points: false,
      data: steps.flatMap((r) => r.gradNorm === undefined ? [] : [[r.step, r.gradNorm]]),
    }]),
  }];
}

const escapeHtml = (s: string) =>
  s.replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" })[c]!);

/** JSON that can sit inside a <script> element. */
const scriptJson = (value: unknown) => JSON.stringify(value).replace(/</g, "\\u003c");

/** Draws every chart with uPlot (runs in the page). */
const DRAW = `
const plots = [];
for (const c of CHARTS) {
  const el = document.getElementById(c.id);
  if (c.x.length === 0) { el.textContent = c.empty; el.className = "empty"; continue; }
  plots.push([el, new uPlot({
    width: el.clientWidth, height: 280, legend: { live: false },
    scales: { x: { time: false } },
    // Steps and epochs are whole numbers: no tick at epoch 1.5.
    axes: [{ label: c.xLabel, incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000] },
      { label: c.yLabel, size: 80 }],
    series: [{ label: c.xLabel }, ...c.series.map((s) => ({
      label: s.label, stroke: s.color, width: 2, spanGaps: true,
      points: { show: s.points || c.x.length === 1, size: 7, fill: s.color },
    }))],
  }, [c.x, ...c.series.map((s) => s.values)], el)]);
}
// The charts fill their grid cells, whatever the window's width.
addEventListener("resize", () => {
  for (const [el, plot] of plots) plot.setSize({ width: el.clientWidth, height: 280 });
});`;

/**
 * The page for `records` of a run with `config`.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { DEFAULTS } from "./config.ts";
 * import { renderReport } from "./report.ts";
 * const html = renderReport([], DEFAULTS, 2, { script: "", style: "" });
 * assert.ok(html.includes("<td>hidden</td><td>512,512</td>"));
 * assert.ok(!/src="http|href="http/.test(html)); // nothing to fetch
 * ```
 */
export function renderReport(
  records: readonly MetricRecord[],
  config: TrainConfig,
  worldSize: number,
  assets: ReportAssets,
): string {
  const last = records.at(-1);
  const lastEpoch = records.findLast((r) => r.kind === "epoch");
  const accuracy = typeof lastEpoch?.testAccuracy === "number"
    ? `, test accuracy ${(100 * lastEpoch.testAccuracy).toFixed(2)}%`
    : typeof lastEpoch?.validationLoss === "number"
    ? `, validation loss ${lastEpoch.validationLoss.toFixed(4)}`
    : "";
  const lastEval = records.findLast((r) => r.kind === "eval");
  const estimated = typeof lastEval?.validationLoss === "number"
    ? `; at iter ${lastEval.step} train loss ${lastEval.trainLoss?.toFixed(4)}, ` +
      `val loss ${lastEval.validationLoss.toFixed(4)}`
    : "";
  const status = !last
    ? "no step finished yet"
    : config.dataset === "tokens"
    ? `iter ${last.step}/${config.maxIters}, loss ${last.loss.toFixed(4)}${estimated}; ` +
      `updated ${last.time}`
    : `epoch ${last.epoch}/${config.epochs}, step ${last.step}, loss ${last.loss.toFixed(4)}` +
      `${accuracy}; updated ${last.time}`;
  const rows = [...applyingSettings(config), ["worldSize", worldSize]].map(([key, value]) =>
    `<tr><td>${escapeHtml(String(key))}</td><td>${escapeHtml(String(value))}</td></tr>`
  ).join("\n");
  const shown = charts(records, config);
  const sections = shown.map((c) =>
    `<section><h2>${c.title}</h2><div id="${c.id}"></div></section>`
  ).join("\n");
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>dtrain: ${escapeHtml(config.model)} on ${escapeHtml(config.dataset)}</title>
<style>${assets.style}
body { font-family: system-ui, sans-serif; margin: 24px; color: #222; }
.grid { display: grid; grid-template-columns: repeat(auto-fit, minmax(min(100%, 480px), 1fr));
  gap: 16px; }
.grid > section { min-width: 0; }
h2 { font-size: 16px; margin: 8px 0; }
.empty { color: #888; padding: 16px 0; }
table { border-collapse: collapse; font-size: 13px; }
td { border-bottom: 1px solid #eee; padding: 2px 12px 2px 0; }
</style>
</head>
<body>
<h1>dtrain: ${escapeHtml(config.model)} on ${escapeHtml(config.dataset)}</h1>
<p id="status">${escapeHtml(status)}</p>
<div class="grid">
${sections}
</div>
<h2>Configuration</h2>
<table>
${rows}
</table>
<script>${assets.script}</script>
<script>
const CHARTS = ${scriptJson(shown)};
${DRAW}
</script>
</body>
</html>
`;
}
