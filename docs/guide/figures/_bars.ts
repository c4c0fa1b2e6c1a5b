/**
 * A grouped horizontal bar chart as a self-contained SVG, for the guide's measured figures
 * (chapters 5 to 8; `_chart.ts` draws the line charts), and the one way those figure scripts
 * run an example and read its JSON line.
 * @module
 */

/** One bar: its label, its value, and an optional note printed after the value. */
export interface Bar {
  label: string;
  value: number;
  note?: string;
}

const escape = (s: string) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");

/** The SVG text of `bars` (one per row, longest at full width), under `title`, with a caption. */
export function barChart(
  bars: Bar[],
  opts: { title: string; unit: string; caption: string; digits?: number },
): string {
  if (bars.length === 0) throw new Error("barChart: no bars");
  const max = Math.max(...bars.map((b) => b.value));
  if (!(max > 0)) throw new Error(`barChart: the largest value is ${max}, not positive`);
  const labelW = 230, barW = 380, rowH = 26, top = 40, width = labelW + barW + 190;
  const height = top + bars.length * rowH + 40;
  const rows = bars.map((b, i) => {
    const y = top + i * rowH;
    const w = Math.max(1, (b.value / max) * barW);
    const value = [b.value.toFixed(opts.digits ?? 1), opts.unit, b.note].filter(Boolean).join(" ");
    return `<text x="${labelW - 8}" y="${y + 17}" text-anchor="end">${escape(b.label)}</text>` +
      `<rect x="${labelW}" y="${y + 4}" width="${w.toFixed(1)}" height="${
        rowH - 8
      }" fill="#4c78a8"/>` +
      `<text x="${(labelW + w + 6).toFixed(1)}" y="${y + 17}">${escape(value)}</text>`;
  });
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" ` +
    `font-family="sans-serif" font-size="13">\n` +
    `<rect width="100%" height="100%" fill="white"/>\n` +
    `<text x="10" y="22" font-size="15" font-weight="bold">${escape(opts.title)}</text>\n` +
    rows.join("\n") + "\n" +
    `<text x="10" y="${height - 12}" font-size="11" fill="#555">${escape(opts.caption)}</text>\n` +
    `</svg>\n`;
}

/**
 * Runs `deno ARGS` from the repository root and returns the last line of its output that rank 0
 * printed as JSON (`[rank 0] {...}`, as the launcher prefixes it). Throws with the output if the
 * program fails.
 */
export async function runJson(args: string[], env: Record<string, string> = {}): Promise<unknown> {
  const out = await new Deno.Command(Deno.execPath(), {
    args,
    cwd: new URL("../../../", import.meta.url),
    env,
    stdout: "piped",
    stderr: "piped",
    signal: AbortSignal.timeout(600_000),
  }).output();
  const text = new TextDecoder().decode(out.stdout) + new TextDecoder().decode(out.stderr);
  if (!out.success) throw new Error(`deno ${args.join(" ")} failed:\n${text}`);
  const lines = text.split("\n").filter((l) => l.startsWith("[rank 0] {"));
  if (lines.length === 0) {
    throw new Error(`deno ${args.join(" ")}: no JSON line on rank 0:\n${text}`);
  }
  return JSON.parse(lines[lines.length - 1].slice("[rank 0] ".length));
}

/**
 * {@linkcode runJson} of `script` with `args` on `nproc` ranks through the launcher, on a free
 * port (other jobs on the machine may hold the default 29500).
 */
export function launchJson(
  nproc: number,
  script: string,
  args: string[],
  env: Record<string, string> = {},
): Promise<unknown> {
  return runJson([
    "run",
    "-A",
    "--v8-flags=--expose-gc",
    "src/launch/main.ts",
    "--nproc-per-node",
    String(nproc),
    "--master-port",
    String(freePort()),
    script,
    ...args,
  ], env);
}

/** A TCP port nothing listens on now. */
function freePort(): number {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const { port } = listener.addr as Deno.NetAddr;
  listener.close();
  return port;
}
