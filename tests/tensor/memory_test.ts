/**
 * Native memory comes back: through `tidy`, `dispose()` (idempotent, with views sharing storage),
 * and the FinalizationRegistry backstop after a garbage collection (needs `--v8-flags=--expose-gc`).
 * @module
 */

import assert from "node:assert/strict";
import {
  allocatedBytes,
  F,
  keep,
  nn,
  noGrad,
  randn,
  type Tensor,
  tensor,
  tidy,
  zeros,
} from "../../mod.ts";
import { linear } from "../../src/tensor/ops/matmul.ts";
import { crossEntropy } from "../../src/tensor/ops/cross_entropy.ts";

const gc = (globalThis as { gc?: () => void }).gc;

/** Collects garbage and lets the FinalizationRegistry callbacks run. */
async function collectGarbage(): Promise<void> {
  for (let i = 0; i < 5; i++) {
    gc!();
    await new Promise((resolve) => setTimeout(resolve, 0));
  }
}

Deno.test({
  name: "the suite runs with --v8-flags=--expose-gc",
  fn: () => assert.equal(typeof gc, "function", "run deno test with --v8-flags=--expose-gc"),
});

Deno.test("allocatedBytes returns to its level after tidy around 20 MLP training steps", () => {
  const start = allocatedBytes();
  const params = noGrad(() => [
    randn([16, 8], { std: 0.3 }),
    zeros([16]),
    randn([4, 16], { std: 0.3 }),
    zeros([4]),
  ]).map((p) => p.requiresGrad_());
  const x = randn([32, 8]);
  const y = tensor(Int32Array.from({ length: 32 }, (_, i) => i % 4), [32]);
  const [w1, b1, w2, b2] = params;
  const step = () =>
    tidy(() => {
      const loss = crossEntropy(linear(linear(x, w1, b1).relu(), w2, b2), y);
      loss.backward();
      noGrad(() => {
        for (const p of params) p.add_(p.grad!, -0.1);
      });
      return loss.item();
    });

  // The first step allocates the gradients, which persist (like PyTorch's .grad).
  const beforeGrads = allocatedBytes();
  const first = step();
  const gradBytes = params.reduce((n, p) => n + p.numel() * 4, 0);
  assert.equal(allocatedBytes(), beforeGrads + gradBytes);
  const level = allocatedBytes();
  let last = first;
  for (let i = 0; i < 20; i++) {
    last = step();
    assert.equal(allocatedBytes(), level, `bytes after step ${i + 1}`);
  }
  assert.ok(last < first, `loss went from ${first} to ${last}`);

  for (const p of [...params, x, y]) {
    p.grad?.dispose();
    p.dispose();
  }
  assert.equal(allocatedBytes(), start);
});

Deno.test("tidy frees everything made inside but what it returns and keep()s", () => {
  const before = allocatedBytes();
  let kept: Tensor | undefined;
  const { out, list } = tidy(() => {
    const a = tensor([1, 2, 3, 4]);
    kept = keep(a.mul(10));
    const inner = tidy(() => a.add(1).exp());
    return { out: inner.mul(2), list: [a.sub(1)] };
  });
  assert.equal(allocatedBytes(), before + 3 * 16);
  assert.deepEqual(Array.from(kept!.toArray()), [10, 20, 30, 40]);
  assert.deepEqual(Array.from(list[0].toArray()), [0, 1, 2, 3]);
  for (const t of [out, list[0], kept!]) t.dispose();
  assert.equal(allocatedBytes(), before);
});

Deno.test("tidy frees its tensors when fn throws, and rejects async fn", () => {
  const before = allocatedBytes();
  assert.throws(() =>
    tidy(() => {
      tensor([1, 2, 3]).exp();
      throw new Error("boom");
    }), /boom/);
  assert.equal(allocatedBytes(), before);
  assert.throws(
    // deno-lint-ignore require-await
    () => tidy(async () => tensor([1, 2]).exp()),
    (e: Error) => e instanceof TypeError && /Promise/.test(e.message),
  );
  assert.equal(allocatedBytes(), before);
});

Deno.test("dispose() is idempotent and frees the bytes once", () => {
  const before = allocatedBytes();
  const t = zeros([1000]);
  assert.equal(allocatedBytes(), before + 4000);
  t.dispose();
  assert.equal(allocatedBytes(), before);
  assert.ok(t.disposed);
  t.dispose();
  assert.equal(allocatedBytes(), before);
  {
    using u = zeros([10]);
    assert.equal(allocatedBytes(), before + 40);
    assert.equal(u.numel(), 10);
  }
  assert.equal(allocatedBytes(), before);
});

Deno.test("using a disposed tensor throws an error that says it was disposed", () => {
  const t = tensor([1, 2, 3]);
  t.dispose();
  const uses: [string, () => unknown][] = [
    ["toArray", () => t.toArray()],
    ["sum", () => t.sum()],
    ["add", () => t.add(1)],
    ["matmul", () => t.reshape(3, 1).matmul(tensor([[1]]))],
  ];
  for (const [name, use] of uses) {
    assert.throws(
      use,
      (e: Error) =>
        e instanceof ReferenceError && /tensor \[3(, 1)?\] f32 was disposed/.test(e.message),
      name,
    );
  }
});

Deno.test("views keep the storage alive until the last one is disposed", () => {
  const before = allocatedBytes();
  const base = tensor(Float32Array.from({ length: 12 }, (_, i) => i), [3, 4]);
  const reshaped = base.reshape(4, 3);
  const transposed = base.t();
  const detached = base.detach();
  assert.equal(base.storage.refs, 4);
  base.dispose();
  reshaped.dispose();
  assert.equal(allocatedBytes(), before + 48);
  assert.deepEqual(Array.from(transposed.toArray()), [0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11]);
  transposed.dispose();
  assert.deepEqual(Array.from(detached.toArray()), [...Array(12).keys()]);
  assert.equal(allocatedBytes(), before + 48);
  detached.dispose();
  assert.equal(allocatedBytes(), before);
  assert.equal(base.storage.ptr, null);
});

Deno.test("the FinalizationRegistry frees tensors that were dropped without dispose", async () => {
  await collectGarbage();
  const before = allocatedBytes();
  (() => {
    for (let i = 0; i < 8; i++) {
      const t = randn([256, 64]);
      t.mul(2).relu();
      t.reshape(64, 256).t();
    }
  })();
  assert.ok(allocatedBytes() >= before + 16 * 256 * 64 * 4, "the tensors were allocated");
  await collectGarbage();
  assert.equal(allocatedBytes(), before);
});

Deno.test("the FinalizationRegistry frees a dropped autograd graph", async () => {
  await collectGarbage();
  const before = allocatedBytes();
  (() => {
    const w = randn([32, 32]).requiresGrad_();
    const loss = randn([8, 32]).matmul(w).tanh().softmax().mean();
    loss.backward(undefined, { retainGraph: true });
  })();
  await collectGarbage();
  assert.equal(allocatedBytes(), before);
});

Deno.test("backward frees its temporaries: only the leaves' gradients stay", () => {
  tidy(() => {
    const leaf = (shape: number[]) => randn(shape).requiresGrad_();
    const x = leaf([4, 6]), w = leaf([5, 6]), b = leaf([5]), g = leaf([5]), c = leaf([3, 1]);
    const e = leaf([10, 5]);
    const idx = tensor(Int32Array.from([1, 2, 3, 4]), [4]);
    const losses: [string, () => Tensor][] = [
      ["linear + layerNorm", () => F.layerNorm(F.linear(x, w, b), [5], g, b).sum()],
      ["gelu + crossEntropy", () => F.crossEntropy(F.linear(x, w, b).gelu(), idx)],
      ["broadcast", () => c.expand(2, 3, 5).add(b).tanh().mean()],
      ["transposed matmul", () => x.t().matmul(x).softmax().sum()],
      ["embedding + mse", () => F.mseLoss(F.linear(x, w), F.embedding(idx, e))],
      ["dropout", () => F.dropout(x, 0.3).logSoftmax().sum()],
      ["leaf reuse", () => x.mul(x).add(x.t().t()).sum()],
      ["batched matmul", () => x.reshape(2, 2, 6).matmul(x.reshape(2, 6, 2)).sum()],
    ];
    for (const [, loss] of losses) loss().backward();
    for (const [name, loss] of losses) {
      const l = loss();
      const before = allocatedBytes();
      l.backward();
      assert.ok(
        allocatedBytes() <= before,
        `${name}: backward kept ${allocatedBytes() - before} bytes`,
      );
    }
  });
});

Deno.test({
  name: "disposing a module's parameters frees their memory at once",
  fn: () => {
    const before = allocatedBytes();
    const layer = new nn.Linear(100, 100);
    assert.equal(allocatedBytes(), before + (100 * 100 + 100) * 4);
    for (const p of layer.parameters()) p.dispose();
    assert.equal(allocatedBytes(), before);
  },
});
