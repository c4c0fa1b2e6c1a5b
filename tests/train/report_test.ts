/**
 * What a run leaves beside its snapshot: metrics.jsonl and report.html, and the page as a real
 * headless Chromium draws it (skipped, saying why, where Debian's `chromium` is not installed;
 * `apt-get install chromium`). DTRAIN_REPORT_SCREENSHOT=FILE keeps the screenshot to look at.
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { withTempDir } from "../_harness/processes.ts";
import { freePort } from "../_harness/ranks.ts";
import type { MetricRecord } from "../../src/train/metrics.ts";
import { assertSucceeded, train } from "./_train.ts";
import { countColor, decodePng } from "./_png.ts";

function findChromium(): string | null {
  for (const dir of (Deno.env.get("PATH") ?? "").split(":")) {
    for (const name of ["chromium", "chromium-browser"]) {
      try {
        if (Deno.statSync(join(dir, name)).isFile) return join(dir, name);
      } catch {
        // not here
      }
    }
  }
  return null;
}

const CHROMIUM = findChromium();
if (CHROMIUM === null) {
  console.warn(
    "report_test: the screenshot step is skipped: no chromium on PATH (apt-get install chromium)",
  );
}

/** The curves' colours in src/train/report.ts, by chart. */
const CURVES = {
  "training loss": "#1f77b4",
  "test accuracy": "#2ca02c",
  "throughput": "#9467bd",
  "gradient norm": "#ff7f0e",
};

async function chromium(args: string[]): Promise<string> {
  const out = await new Deno.Command(CHROMIUM!, {
    // No sandbox: CI runs as root. Every host resolves to nothing: the page must need no network.
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--hide-scrollbars",
      "--host-resolver-rules=MAP * ~NOTFOUND",
      "--virtual-time-budget=3000",
      ...args,
    ],
    stdout: "piped",
    stderr: "piped",
    signal: AbortSignal.timeout(60_000),
  }).output();
  assert.ok(out.success, new TextDecoder().decode(out.stderr));
  return new TextDecoder().decode(out.stdout);
}

Deno.test("train writes metrics.jsonl and a self-contained report.html beside the snapshot", async (t) => {
  await withTempDir("dtrain_report_", async (dir) => {
    const snapshot = join(dir, "run", "snap.safetensors");
    const run = await train([
      ...["--nproc-per-node", "2", "--master-port", String(freePort()), "--threads", "1"],
      ...["--hidden", "32", "--batch-size", "500", "--epochs", "2", "--snapshot", snapshot],
    ]);
    assertSucceeded(run);

    const records: MetricRecord[] = (await Deno.readTextFile(join(dir, "run", "metrics.jsonl")))
      .trimEnd().split("\n").map((l) => JSON.parse(l));
    const epochs = records.filter((r) => r.kind === "epoch");
    const steps = records.filter((r) => r.kind === "step");
    // 60000 samples, 2 ranks of 500 a step: 60 steps an epoch, logged every 6.
    assert.deepEqual(epochs.map((r) => [r.epoch, r.step]), [[1, 60], [2, 120]]);
    assert.deepEqual(steps.map((r) => r.step), Array.from({ length: 20 }, (_, i) => 6 * (i + 1)));
    for (const r of steps) {
      assert.ok(r.loss > 0 && r.lr === 0.05 && r.samplesPerSecond > 0 && r.gradNorm! > 0, `${r}`);
    }
    for (const r of epochs) assert.ok(r.testAccuracy! > 0.6 && r.testAccuracy! <= 1, `${r}`);
    assert.ok(steps.at(-1)!.loss < steps[0].loss, "the loss went down");

    const html = await Deno.readTextFile(join(dir, "run", "report.html"));
    assert.doesNotMatch(html, /(src|href)=["']?(https?:)?\/\//, "nothing to fetch");
    assert.match(html, /uPlot/);
    assert.match(html, /<td>hidden<\/td><td>32<\/td>/);

    await t.step({
      name: "the page draws its curves in headless Chromium",
      ignore: CHROMIUM === null,
      fn: async () => {
        const page = `file://${join(dir, "run", "report.html")}`;
        const dom = await chromium(["--dump-dom", page]);
        assert.equal(dom.match(/<canvas/g)?.length, 4, "four charts drawn by uPlot");
        const shot = Deno.env.get("DTRAIN_REPORT_SCREENSHOT") ?? join(dir, "report.png");
        await chromium([`--screenshot=${shot}`, "--window-size=1240,1000", page]);
        const image = decodePng(await Deno.readFile(shot));
        for (const [curve, color] of Object.entries(CURVES)) {
          const pixels = countColor(image, color);
          assert.ok(pixels > 300, `the ${curve} curve (${color}) has ${pixels} pixels`);
        }
      },
    });
  });
});
