// autocast scopes (src/tensor/autocast.ts): which ops run in which dtype inside a scope, nesting,
// enabled: false, the weight cast cache, the state after an exception, async scopes, and device
// types (cpu and the emulated accelerator).

import assert from "node:assert/strict";
import {
  autocast,
  autocastAsync,
  F,
  getAutocastDtype,
  isAutocastEnabled,
  noGrad,
  randn,
  type Tensor,
  tensor,
} from "../../mod.ts";
import { packedCausalAttention } from "../../src/tensor/ops/attention.ts";
import { deviceTest } from "../_harness/devices.ts";

const cpu = { deviceType: "cpu", dtype: "bf16" } as const;

Deno.test("inside autocast the lower-precision ops run in the scope's dtype, the fp32 ops in f32, the rest in their inputs' dtype", () => {
  const x = randn([4, 8]), w = randn([6, 8]), b = randn([6]);
  const q = randn([1, 2, 4, 8]), t = tensor([1, 0, 2, 5], [4], { dtype: "i32" });
  autocast(cpu, () => {
    assert.equal(F.linear(x, w, b).dtype, "bf16");
    assert.equal(x.matmul(w.transpose(0, 1)).dtype, "bf16");
    assert.equal(F.scaledDotProductAttention(q, q, q).dtype, "bf16");
    assert.equal(packedCausalAttention(randn([1, 4, 6]), 2).dtype, "bf16");
    const logits = F.linear(x, w);
    assert.equal(F.crossEntropy(logits, t).dtype, "f32");
    assert.equal(F.mseLoss(logits, logits.mul(0.5)).dtype, "f32");
    assert.equal(F.binaryCrossEntropyWithLogits(logits, logits.sigmoid()).dtype, "f32");
    // Neither list: the inputs' dtype, with PyTorch's promotion.
    assert.equal(logits.softmax(-1).dtype, "bf16");
    assert.equal(logits.logSoftmax(-1).dtype, "bf16");
    assert.equal(F.gelu(logits).dtype, "bf16");
    assert.equal(F.layerNorm(logits, [6]).dtype, "bf16");
    assert.equal(F.gelu(x).dtype, "f32");
    assert.equal(logits.add(randn([4, 6])).dtype, "f32");
    assert.equal(logits.sum().dtype, "bf16");
  });
  assert.equal(F.linear(x, w, b).dtype, "f32");
});

Deno.test("inside autocast f32 parameters get f32 gradients through the bf16 casts", () => {
  const w = randn([3, 4], { requiresGrad: true }), x = randn([2, 4], { requiresGrad: true });
  const y = autocast(cpu, () => F.linear(x, w).sum());
  assert.equal(y.dtype, "bf16");
  y.backward();
  assert.equal(w.grad!.dtype, "f32");
  assert.equal(x.grad!.dtype, "f32");
  // The gradient of x.sum(0) @ ... is the bf16-rounded column sums of w, in f32.
  const sums = Array.from(
    { length: 4 },
    (_, j) =>
      Array.from({ length: 3 }, (_, i) => w.to("bf16").to("f32").toArray()[i * 4 + j])
        .reduce((a, b) => a + b),
  );
  (x.grad!.toArray() as Float32Array).slice(0, 4).forEach((g, j) =>
    assert.ok(Math.abs(g - sums[j]) <= Math.abs(sums[j]) * 2 ** -7 + 1e-6)
  );
});

Deno.test("scopes nest: an inner scope sets its dtype or turns autocast off, and the outer state comes back", () => {
  const x = randn([2, 3]), w = randn([4, 3]);
  assert.equal(isAutocastEnabled("cpu"), false);
  assert.equal(getAutocastDtype("cpu"), "bf16");
  assert.equal(getAutocastDtype("cuda"), "f16");
  autocast(cpu, () => {
    assert.equal(isAutocastEnabled("cpu"), true);
    assert.equal(isAutocastEnabled("emu"), false);
    autocast({ deviceType: "cpu", enabled: false }, () => {
      assert.equal(isAutocastEnabled(), false);
      assert.equal(F.linear(x, w).dtype, "f32");
    });
    autocast({ deviceType: "cpu", dtype: "f16" }, () => {
      assert.equal(getAutocastDtype("cpu"), "f16");
      assert.equal(F.linear(x, w).dtype, "f16");
    });
    assert.equal(getAutocastDtype("cpu"), "bf16");
    assert.equal(F.linear(x, w).dtype, "bf16");
  });
  assert.equal(isAutocastEnabled("cpu"), false);
});

Deno.test("the state is restored when the scope's function throws", () => {
  assert.throws(() =>
    autocast(cpu, () => {
      assert.equal(isAutocastEnabled(), true);
      throw new Error("boom");
    }), /boom/);
  assert.equal(isAutocastEnabled(), false);
  assert.equal(F.linear(randn([1, 2]), randn([2, 2])).dtype, "f32");
});

/** The tensors that `to()` casts of `source` feed into `out`'s graph. */
function castsOf(out: Tensor, source: Tensor): Set<Tensor> {
  const found = new Set<Tensor>(), seen = new Set<Tensor>();
  const walk = (t: Tensor) => {
    if (seen.has(t) || t.gradFn === null) return;
    seen.add(t);
    if (t.gradFn.inputs.includes(source) && t.dtype !== source.dtype) found.add(t);
    t.gradFn.inputs.forEach(walk);
  };
  walk(out);
  return found;
}

Deno.test("a weight used twice in a scope is cast once (cacheEnabled), again after an in-place update, and every time without the cache", () => {
  const w = randn([3, 3], { requiresGrad: true }), x = randn([2, 3]);
  const twice = (options = {}) =>
    autocast({ ...cpu, ...options }, () => F.linear(F.linear(x, w), w).to("f32").sum());
  assert.equal(castsOf(twice(), w).size, 1);
  assert.equal(castsOf(twice({ cacheEnabled: false }), w).size, 2);
  const y = autocast(cpu, () => {
    const first = F.linear(x, w);
    w.storage.version++; // as an optimizer step inside the scope would
    return F.linear(first, w).to("f32").sum();
  });
  assert.equal(castsOf(y, w).size, 2);
  // Separate scopes have separate caches.
  const a = autocast(cpu, () => F.linear(x, w)), b = autocast(cpu, () => F.linear(x, w));
  assert.notEqual([...castsOf(a, w)][0], [...castsOf(b, w)][0]);
});

Deno.test("an async scope holds across awaits and does not leak into code running beside it", async () => {
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  const scoped = autocastAsync(cpu, async () => {
    await gate;
    assert.equal(isAutocastEnabled(), true);
    return F.linear(randn([1, 2]), randn([2, 2])).dtype;
  });
  // The scope is waiting at its await: the code here runs outside it.
  assert.equal(isAutocastEnabled(), false);
  assert.equal(F.linear(randn([1, 2]), randn([2, 2])).dtype, "f32");
  release();
  assert.equal(await scoped, "bf16");
  assert.equal(isAutocastEnabled(), false);
  await assert.rejects(autocastAsync(cpu, () => Promise.reject(new Error("late"))), /late/);
  assert.equal(isAutocastEnabled(), false);
});

Deno.test("autocast refuses unknown device types and non-half dtypes", () => {
  // @ts-expect-error: a device type autocast does not know
  assert.throws(() => autocast({ deviceType: "tpu" }, () => 0), /deviceType must be "cpu"/);
  // @ts-expect-error: f32 is not a lower-precision dtype
  assert.throws(() => autocast({ deviceType: "cpu", dtype: "f32" }, () => 0), /"bf16" or "f16"/);
  assert.equal(autocast(cpu, () => 42), 42);
});

deviceTest(
  "an accelerator's autocast scope casts its tensors and leaves the CPU's alone",
  (device) => {
    const type = device.startsWith("cuda") ? "cuda" : "emu";
    const x = randn([2, 4]), w = randn([3, 4], { requiresGrad: true });
    const [xd, wd] = [x.to(device), w.to(device)];
    const ys = autocast({ deviceType: type, dtype: "bf16" }, () => {
      assert.equal(F.linear(x, w).dtype, "f32"); // cpu tensors: not this scope's device type
      return F.linear(xd, wd);
    });
    assert.equal(ys.dtype, "bf16");
    const yc = autocast(cpu, () => F.linear(x, w));
    assert.deepEqual(ys.to("cpu").to("f32").toArray(), yc.to("f32").toArray());
    ys.to("f32").sum().backward();
    assert.equal(w.grad!.dtype, "f32");
  },
);

Deno.test("a weight cast cached under noGrad is made again in grad mode, so the gradient reaches the weight", () => {
  const w = randn([3, 3], { requiresGrad: true }), x = randn([2, 3]);
  const y = autocast(cpu, () => {
    noGrad(() => F.linear(x, w));
    return F.linear(x, w).to("f32").sum();
  });
  y.backward();
  assert.ok(w.grad !== null, "w got a gradient");
});
