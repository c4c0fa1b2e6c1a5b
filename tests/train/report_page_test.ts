// What the report page shows for a run: only the charts and series that have data or will (a
// Fashion-MNIST run's test accuracy before its first epoch ends), only the settings that apply to
// the run's model and data (no GPT shape on an MLP run, no `warmupSteps` on nanoGPT's iteration
// run), and charts that take the window's width.
import assert from "node:assert/strict";
import { DEFAULTS, GPT_DEFAULTS, TOKENS_DEFAULTS } from "../../src/train/_schema.ts";
import type { TrainConfig } from "../../src/train/config.ts";
import type { MetricRecord } from "../../src/train/metrics.ts";
import { renderReport } from "../../src/train/report.ts";

const ASSETS = { script: "", style: "" };
const tokensRun: TrainConfig = {
  ...DEFAULTS,
  ...GPT_DEFAULTS,
  ...TOKENS_DEFAULTS,
  dataset: "tokens",
};
const mlpRun: TrainConfig = { ...DEFAULTS };

const record = (kind: MetricRecord["kind"], step: number, extra: Partial<MetricRecord> = {}) => ({
  kind,
  step,
  epoch: kind === "eval" || extra.epoch === undefined ? 0 : extra.epoch,
  loss: 2,
  lr: 1e-3,
  samplesPerSecond: 100,
  time: "2026-12-03T00:00:00Z",
  ...extra,
});

/** The page's charts and their series, as the page's script receives them. */
function chartsOf(html: string): { id: string; series: { label: string }[] }[] {
  return JSON.parse(/const CHARTS = (.*);\n/.exec(html)![1]);
}

/** The settings table's names. */
const settingsOf = (html: string) => [...html.matchAll(/<tr><td>([^<]+)<\/td>/g)].map((m) => m[1]);

Deno.test("an iteration run's page: no test accuracy, no empty series, nanoGPT's settings only", () => {
  const html = renderReport(
    [record("step", 1), record("eval", 1, { trainLoss: 2.1, validationLoss: 2.2 })],
    tokensRun,
    2,
    ASSETS,
  );
  const charts = chartsOf(html);
  assert.deepEqual(charts.map((c) => c.id), ["loss", "throughput"]);
  assert.deepEqual(charts[0].series.map((s) => s.label), [
    "logged steps",
    "train (estimate_loss)",
    "validation (estimate_loss)",
  ]);
  const settings = settingsOf(html);
  for (const shown of ["maxIters", "warmupIters", "gradientAccumulationSteps", "nLayer", "beta1"]) {
    assert.ok(settings.includes(shown), `${shown} is missing`);
  }
  for (const hidden of ["warmupSteps", "epochs", "hidden", "momentum", "saveEvery", "lrSchedule"]) {
    assert.ok(!settings.includes(hidden), `${hidden} does not apply to an iteration run`);
  }
  assert.equal(settings.at(-1), "worldSize");
});

Deno.test("an MLP run's page: the test-accuracy chart waits for its first epoch, no GPT settings", () => {
  const html = renderReport([record("step", 1, { epoch: 1, gradNorm: 1.5 })], mlpRun, 2, ASSETS);
  assert.deepEqual(chartsOf(html).map((c) => c.id), ["loss", "accuracy", "throughput", "gradnorm"]);
  const settings = settingsOf(html);
  for (const hidden of ["nLayer", "blockSize", "maxIters", "warmupIters", "beta1", "ppSchedule"]) {
    assert.ok(!settings.includes(hidden), `${hidden} does not apply to an MLP run`);
  }
  for (const shown of ["hidden", "epochs", "momentum", "lr"]) {
    assert.ok(settings.includes(shown), `${shown} is missing`);
  }
  // No gradient norm logged: no chart for it.
  const bare = renderReport([record("step", 1, { epoch: 1 })], mlpRun, 2, ASSETS);
  assert.ok(!chartsOf(bare).some((c) => c.id === "gradnorm"));
});

Deno.test("the charts take the window's width rather than a fixed 560 pixels", () => {
  const html = renderReport([record("step", 1, { epoch: 1 })], mlpRun, 1, ASSETS);
  assert.match(
    html,
    /grid-template-columns: repeat\(auto-fit, minmax\(min\(100%, 480px\), 1fr\)\)/,
  );
  assert.match(html, /width: el\.clientWidth/);
  assert.match(html, /addEventListener\("resize"/);
  assert.doesNotMatch(html, /width: 560/);
});
