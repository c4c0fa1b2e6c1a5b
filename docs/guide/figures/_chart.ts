/**
 * A line chart as SVG, for the guide's measured figures: log-scaled x (sizes), linear y, one line
 * and marker per series, a legend, and the caption's source line under the plot.
 * @module
 */

/** One line of a chart. */
export interface Series {
  name: string;
  points: [number, number][];
}

/** What to draw. */
export interface Chart {
  title: string;
  xLabel: string;
  yLabel: string;
  series: Series[];
  /** Label of an x value (default: the number). */
  xTick?: (x: number) => string;
  /** A line under the plot: the command and the machine. */
  source: string;
}

const COLORS = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#b07aa1", "#76b7b2"];
const W = 720, H = 400, L = 70, R = 180, T = 40, B = 70;

const esc = (s: string) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");

/** The SVG text of `chart`, x on a log₂ scale. */
export function lineChart(chart: Chart): string {
  const xs = chart.series.flatMap((s) => s.points.map((p) => p[0]));
  const ys = chart.series.flatMap((s) => s.points.map((p) => p[1]));
  const [x0, x1] = [Math.log2(Math.min(...xs)), Math.log2(Math.max(...xs))];
  const yMax = niceMax(Math.max(...ys));
  const px = (x: number) => L + (Math.log2(x) - x0) / (x1 - x0 || 1) * (W - L - R);
  const py = (y: number) => H - B - y / yMax * (H - T - B);
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" font-family="sans-serif" font-size="12">`,
    `<rect width="${W}" height="${H}" fill="white"/>`,
    `<text x="${W / 2}" y="22" text-anchor="middle" font-size="15">${esc(chart.title)}</text>`,
  ];
  for (let i = 0; i <= 5; i++) {
    const y = yMax * i / 5;
    out.push(
      `<line x1="${L}" x2="${W - R}" y1="${py(y)}" y2="${py(y)}" stroke="#ddd"/>`,
      `<text x="${L - 6}" y="${py(y) + 4}" text-anchor="end">${+y.toPrecision(3)}</text>`,
    );
  }
  for (const x of [...new Set(xs)].sort((a, b) => a - b)) {
    out.push(
      `<line x1="${px(x)}" x2="${px(x)}" y1="${H - B}" y2="${H - B + 4}" stroke="#333"/>`,
      `<text x="${px(x)}" y="${H - B + 18}" text-anchor="middle">${
        esc(chart.xTick?.(x) ?? String(x))
      }</text>`,
    );
  }
  out.push(
    `<line x1="${L}" x2="${W - R}" y1="${H - B}" y2="${H - B}" stroke="#333"/>`,
    `<line x1="${L}" x2="${L}" y1="${T}" y2="${H - B}" stroke="#333"/>`,
    `<text x="${(L + W - R) / 2}" y="${H - B + 38}" text-anchor="middle">${
      esc(chart.xLabel)
    }</text>`,
    `<text transform="translate(18 ${(T + H - B) / 2}) rotate(-90)" text-anchor="middle">${
      esc(chart.yLabel)
    }</text>`,
    `<text x="${L}" y="${H - 10}" font-size="10" fill="#555">${esc(chart.source)}</text>`,
  );
  chart.series.forEach((s, i) => {
    const c = COLORS[i % COLORS.length];
    const d = s.points.map((p, j) =>
      `${j ? "L" : "M"}${px(p[0]).toFixed(1)},${py(p[1]).toFixed(1)}`
    );
    out.push(`<path d="${d.join(" ")}" fill="none" stroke="${c}" stroke-width="2"/>`);
    for (const p of s.points) {
      out.push(
        `<circle cx="${px(p[0]).toFixed(1)}" cy="${py(p[1]).toFixed(1)}" r="3" fill="${c}"/>`,
      );
    }
    const ly = T + 10 + i * 20;
    out.push(
      `<line x1="${W - R + 15}" x2="${
        W - R + 35
      }" y1="${ly}" y2="${ly}" stroke="${c}" stroke-width="2"/>`,
      `<text x="${W - R + 40}" y="${ly + 4}">${esc(s.name)}</text>`,
    );
  });
  out.push("</svg>");
  return out.join("\n") + "\n";
}

/** A round upper bound for the y axis: 1, 2 or 5 times a power of ten. */
function niceMax(v: number): number {
  const p = 10 ** Math.floor(Math.log10(v || 1));
  return [1, 2, 5, 10].map((m) => m * p).find((m) => m >= v)!;
}

/** The machine a figure was measured on, for its caption: CPU model, cores, kernel. */
export function machine(): string {
  const cpu = Deno.readTextFileSync("/proc/cpuinfo");
  const model = /model name\s*: (.*)/.exec(cpu)?.[1] ?? "unknown CPU";
  return `${model}, ${navigator.hardwareConcurrency} cores, Linux ${Deno.osRelease()}`;
}

/** "4 KiB", "16 MiB". */
export function bytesLabel(b: number): string {
  return b >= 1 << 20 ? `${b / (1 << 20)} MiB` : `${b / 1024} KiB`;
}
