/**
 * MFU against this machine: the train job's peak (src/train/_peak_flops.ts) is `--peak-flops`,
 * DTRAIN_PEAK_FLOPS, an A100's on CUDA (nanoGPT's), or the CPU's measured matmul rate, and the
 * iteration line names it.
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { GPT } from "../../src/nn/gpt.ts";
import { formatFlops, measureMatmulFlops, peakFlops } from "../../src/train/_peak_flops.ts";
import { writeCharData } from "./_tokens.ts";
import { assertSucceeded, train } from "./_train.ts";

Deno.test("formatFlops writes FLOP/s in the unit a log reads best", () => {
  assert.equal(formatFlops(312e12), "312 TFLOP/s");
  assert.equal(formatFlops(48_123_000_000), "48.1 GFLOP/s");
  assert.equal(formatFlops(2.5e6), "2.5 MFLOP/s");
});

Deno.test("measureMatmulFlops measures dtrain's cpu matmul: a plausible rate in under 1.5 s", () => {
  const start = performance.now();
  const flops = measureMatmulFlops("cpu", "f32");
  const ms = performance.now() - start;
  // From a slow core's 0.1 GFLOP/s to a server's 10 TFLOP/s.
  assert.ok(flops > 1e8 && flops < 1e13, `${flops} FLOP/s`);
  assert.ok(ms < 1500, `measured in ${ms} ms`);
});

Deno.test("peakFlops: --peak-flops, then DTRAIN_PEAK_FLOPS, then an A100's on cuda, else measured", () => {
  const saved = Deno.env.get("DTRAIN_PEAK_FLOPS");
  try {
    Deno.env.delete("DTRAIN_PEAK_FLOPS");
    assert.deepEqual(peakFlops("cpu", "cpu", "f32", 2e12), {
      flops: 2e12,
      label: "--peak-flops 2 TFLOP/s",
    });
    assert.deepEqual(peakFlops("cuda", "cpu", "bf16"), {
      flops: 312e12,
      label: "an A100's bf16 312 TFLOP/s",
    });
    const measured = peakFlops("cpu", "cpu", "f32");
    assert.match(measured.label, /^cpu f32 matmul [\d.]+ [GTM]FLOP\/s, measured$/);
    Deno.env.set("DTRAIN_PEAK_FLOPS", "5e11");
    assert.deepEqual(peakFlops("cpu", "cpu", "f32"), {
      flops: 5e11,
      label: "DTRAIN_PEAK_FLOPS 500 GFLOP/s",
    });
    assert.equal(peakFlops("cpu", "cpu", "f32", 1e9).flops, 1e9, "the flag wins");
    Deno.env.set("DTRAIN_PEAK_FLOPS", "fast");
    assert.throws(() => peakFlops("cpu", "cpu", "f32"), /DTRAIN_PEAK_FLOPS: .* got fast/);
  } finally {
    if (saved === undefined) Deno.env.delete("DTRAIN_PEAK_FLOPS");
    else Deno.env.set("DTRAIN_PEAK_FLOPS", saved);
  }
});

Deno.test("GPT.estimateMfu divides by the peak it is given (an A100's by default)", () => {
  const gpt = new GPT({ vocabSize: 32, blockSize: 8, nLayer: 1, nHead: 2, nEmbd: 8 });
  const a100 = gpt.estimateMfu(4, 0.01);
  assert.ok(
    Math.abs(gpt.estimateMfu(4, 0.01, gpt.numParams(), 1e9) - a100 * 312e3) < 1e-9 * a100 * 312e3,
  );
});

Deno.test("the train job's iteration line says what its MFU is a fraction of", async () => {
  const dir = await Deno.makeTempDir({ prefix: "dtrain_peak_" });
  try {
    await writeCharData(join(dir, "data"));
    const job = [
      ...["--dataset", "tokens", "--model", "gpt", "--data-dir", join(dir, "data")],
      ...["--max-iters", "8", "--eval-interval", "100", "--eval-iters", "1", "--log-interval", "1"],
      ...["--n-layer", "1", "--n-head", "2", "--n-embd", "16", "--block-size", "16"],
      ...["--batch-size", "4", "--threads", "1"],
    ];
    const measured = await train([...job, "--out-dir", join(dir, "a")]);
    assertSucceeded(measured);
    assert.match(
      measured.stdout,
      /^iter 8: loss [\d.]+, time [\d.]+ms, mfu [\d.]+% \(of cpu f32 matmul [\d.]+ [GTM]FLOP\/s, measured\)$/m,
    );
    // Before the sixth iteration MFU is not estimated yet (nanoGPT's -100%), nor the peak measured.
    assert.match(measured.stdout, /^iter 1: loss [\d.]+, time [\d.]+ms, mfu -100\.00%$/m);
    const given = await train([...job, "--out-dir", join(dir, "b")], {
      env: { DTRAIN_PEAK_FLOPS: "1e6" },
    });
    assertSucceeded(given);
    // 1 MFLOP/s is far below what the run does: well over 100%.
    const mfu = /^iter 8: .*mfu ([\d.]+)% \(of DTRAIN_PEAK_FLOPS 1 MFLOP\/s\)$/m.exec(given.stdout);
    assert.ok(mfu && Number(mfu[1]) > 100, given.stdout);
    const flag = await train([...job, "--out-dir", join(dir, "c"), "--peak-flops", "1e6"]);
    assertSucceeded(flag);
    assert.match(flag.stdout, /^iter 8: .*mfu [\d.]+% \(of --peak-flops 1 MFLOP\/s\)$/m);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
