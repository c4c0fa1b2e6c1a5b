/**
 * The fused cross-entropy and softmax kernels on inputs big enough to be split over the thread
 * pool, against the same quantities composed from elementwise ops and reductions; the reductions
 * of cross-entropy against each other. (Small inputs are checked against PyTorch in layers.json
 * and reduce.json.)
 * @module
 */

import assert from "node:assert/strict";
import { manualSeed, randn, type Tensor, tensor, tidy } from "../../mod.ts";
import { crossEntropy } from "../../src/tensor/ops/cross_entropy.ts";
import { assertClose } from "../_harness/fixtures.ts";

/** log-softmax over the last dimension from exp, sum and log (no fused kernel). */
function composedLogSoftmax(x: Tensor): Tensor {
  const shifted = x.sub(x.max(-1, true).values.detach());
  return shifted.sub(shifted.exp().sum(-1, true).log());
}

function targets(rows: number, classes: number): Tensor {
  const t = Int32Array.from({ length: rows }, (_, i) => (i * 7919) % classes);
  t[3] = -100; // one ignored row
  return tensor(t, [rows], { dtype: "i32" });
}

Deno.test("softmax and log-softmax split over the pool agree with the composed ops", () => {
  tidy(() => {
    manualSeed(1);
    const x = randn([600, 256]).mul(4);
    const reference = composedLogSoftmax(x);
    assertClose(x.logSoftmax(), reference.toArray(), "logSoftmax", { rtol: 1e-5, atol: 2e-6 });
    assertClose(x.softmax(), reference.exp().toArray(), "softmax", { rtol: 1e-5, atol: 1e-7 });
  });
});

Deno.test("cross-entropy's reductions agree: sum = mean * count, none sums to sum", () => {
  tidy(() => {
    manualSeed(2);
    const [rows, classes] = [600, 256];
    const x = randn([rows, classes]).mul(3);
    const y = targets(rows, classes);
    for (const labelSmoothing of [0, 0.1]) {
      const none = crossEntropy(x, y, { reduction: "none", labelSmoothing });
      const sum = crossEntropy(x, y, { reduction: "sum", labelSmoothing }).item();
      const mean = crossEntropy(x, y, { labelSmoothing }).item();
      assert.equal(none.toArray()[3], 0, "the ignored row's loss is 0");
      const rowSum = Array.from(none.toArray()).reduce((a, b) => a + b, 0);
      assert.ok(Math.abs(rowSum - sum) <= 1e-5 * Math.abs(sum), `${rowSum} vs ${sum}`);
      assert.ok(Math.abs(mean * (rows - 1) - sum) <= 1e-5 * Math.abs(sum), `${mean} vs ${sum}`);
    }
  });
});

Deno.test("cross-entropy with label smoothing matches the composed loss and gradient", () => {
  tidy(() => {
    manualSeed(3);
    const [rows, classes, eps] = [600, 256, 0.2];
    const x = randn([rows, classes], { requiresGrad: true });
    const y = targets(rows, classes);
    const g = randn([rows]);
    crossEntropy(x, y, { reduction: "none", labelSmoothing: eps }).mul(g).sum().backward();
    const fused = x.grad!.toArray();
    x.grad = null;
    // loss_r = -sum_c w_rc log p_rc with w = (1 - eps) one-hot + eps / C, 0 on the ignored row
    const w = new Float32Array(rows * classes);
    y.toArray().forEach((t, r) => {
      if (t < 0) return;
      w.fill(eps / classes, r * classes, (r + 1) * classes);
      w[r * classes + t] += 1 - eps;
    });
    const composed = composedLogSoftmax(x).mul(tensor(w, [rows, classes])).sum(-1).neg();
    assertClose(
      crossEntropy(x, y, { reduction: "none", labelSmoothing: eps }),
      composed.toArray(),
      "per-row losses",
      { rtol: 1e-5, atol: 1e-5 },
    );
    composed.mul(g).sum().backward();
    assertClose(fused, x.grad!.toArray(), "gradient", { rtol: 1e-4, atol: 1e-6 });
  });
});

Deno.test("cross-entropy over a 50k-class vocabulary needs no [N, C] weights", () => {
  tidy(() => {
    manualSeed(4);
    const x = randn([4, 50257], { requiresGrad: true });
    const y = tensor([0, 50256, 17, 9999], [4], { dtype: "i32" });
    const loss = crossEntropy(x, y, { reduction: "sum", labelSmoothing: 0.1 });
    loss.backward();
    const grad = x.grad!.toArray();
    // every row of the gradient of a smoothed loss sums to 0 (softmax - target distribution)
    for (let r = 0; r < 4; r++) {
      const s = Array.from(grad.subarray(r * 50257, (r + 1) * 50257)).reduce((a, b) => a + b, 0);
      assert.ok(Math.abs(s) < 1e-4, `row ${r} sums to ${s}`);
    }
    assert.ok(loss.item() > 4 * Math.log(50257) * 0.9);
  });
});
