/**
 * PyTorch's rules that the memory model makes sharper: in-place writes to tensors a backward
 * needs, tensors freed before backward, ops that must hand back a new tensor object, views, and
 * argument checks.
 * @module
 */

import assert from "node:assert/strict";
import {
  allocatedBytes,
  arange,
  F,
  getNumThreads,
  nn,
  noGrad,
  optim,
  randn,
  setNumThreads,
  tensor,
  tidy,
  zeros,
} from "../../mod.ts";

Deno.test("backward refuses when a tensor it reads was modified in place after the forward", () => {
  tidy(() => {
    const w = tensor([1, 2, 3], [3], { requiresGrad: true });
    const x = tensor([3, 3, 3]);
    const y = w.mul(x);
    x.fill_(100);
    assert.throws(
      () => y.sum().backward(),
      /MulBackward: a f32 \[3\] tensor needed for gradient computation was modified by an in-place operation \(it is at version 1, expected 0\)/,
    );
  });
});

Deno.test("an in-place write to a tensor whose value backward does not read is allowed", () => {
  tidy(() => {
    const w = tensor([1, 2, 3], [3], { requiresGrad: true });
    const x = tensor([3, 3, 3]);
    const y = w.add(x);
    x.fill_(100);
    y.sum().backward();
    assert.deepEqual(Array.from(w.grad!.toArray()), [1, 1, 1]);
  });
});

Deno.test("backward after an optimizer step through a retained graph names the modified tensor", () => {
  tidy(() => {
    const model = new nn.Linear(3, 2);
    const opt = new optim.SGD(model.parameters(), { lr: 0.1 });
    const hidden = model.forward(randn([4, 3]));
    const loss = hidden.mul(hidden).sum();
    loss.backward(undefined, { retainGraph: true });
    opt.step();
    assert.throws(() => loss.backward(), /AddmmBackward: .* modified by an in-place operation/);
  });
});

Deno.test("backward through a tensor that tidy already freed says so", () => {
  const w = tensor([1, 2], [2], { requiresGrad: true });
  const loss = tidy(() => w.mul(w).exp().sum());
  assert.throws(() => loss.backward(), (e: unknown) => {
    assert.ok(e instanceof ReferenceError);
    assert.match(e.message, /saved for backward was disposed .*tidy\(\)/);
    return true;
  });
  loss.dispose();
  w.dispose();
});

Deno.test("contiguous, to, t, expand and eval-mode dropout return a tensor that can be disposed alone", () => {
  tidy(() => {
    const x = tensor([[1, 2], [3, 4]], undefined, { requiresGrad: true });
    for (const make of [() => x.contiguous(), () => x.to("f32"), () => x.expand(2, 2)]) {
      const y = make();
      assert.notEqual(y, x);
      y.dispose();
      assert.equal(x.disposed, false);
    }
    const v = tensor([1, 2, 3]);
    const vt = v.t();
    vt.dispose();
    assert.deepEqual(Array.from(v.toArray()), [1, 2, 3]);
    const d = F.dropout(x, 0.5, false);
    d.dispose();
    assert.equal(x.disposed, false);
    // Gradients still flow through the new objects.
    x.contiguous().mul(2).sum().backward();
    assert.deepEqual(Array.from(x.grad!.toArray()), [2, 2, 2, 2]);
  });
});

Deno.test("view refuses a layout it cannot view; reshape copies", () => {
  tidy(() => {
    const t = arange(6).to("f32").reshape(2, 3).t();
    assert.throws(() => t.view(6), /view: shape \[3, 2\] with strides \[1, 3\] is not compatible/);
    assert.deepEqual(Array.from(t.reshape(6).toArray()), [0, 3, 1, 4, 2, 5]);
  });
});

Deno.test("expand refuses -1 in a new leading dimension; transpose of a 0-d tensor is itself", () => {
  tidy(() => {
    assert.throws(
      () => tensor([1, 2, 3]).expand(-1, 3),
      /-1 is not allowed in a new leading dimension/,
    );
    const s = tensor(5, []);
    assert.deepEqual(s.transpose(0, 0).shape, []);
    assert.equal(s.transpose(0, 0).item(), 5);
  });
});

Deno.test("mul_ on an i32 tensor multiplies integers exactly and refuses a fraction", () => {
  tidy(() => {
    const t = tensor([100000000, -3, 7], [3], { dtype: "i32" });
    assert.throws(
      () => t.mul_(0.5),
      /mul_: the result is f32 and cannot be written into an i32 tensor/,
    );
    assert.deepEqual(Array.from(t.toArray()), [100000000, -3, 7]);
    t.mul_(3);
    assert.deepEqual(Array.from(t.toArray()), [300000000, -9, 21]);
  });
});

Deno.test("arange is f32 when any of start, end and step is fractional", () => {
  tidy(() => {
    assert.equal(arange(0, 2.5).dtype, "f32");
    assert.deepEqual(Array.from(arange(0, 2.5).toArray()), [0, 1, 2]);
    assert.equal(arange(0, 3).dtype, "i32");
  });
});

Deno.test("f32 to i32 truncates toward zero, saturates, and maps NaN to 0", () => {
  tidy(() => {
    const t = tensor([1.9, -1.9, 3e10, -3e10, NaN]).to("i32");
    assert.deepEqual(Array.from(t.toArray()), [1, -1, 2147483647, -2147483648, 0]);
  });
});

Deno.test("a shape too large to address is refused with the shape named", () => {
  assert.throws(
    () => zeros([1e10, 1e10]),
    /tensor of shape \[10000000000, 10000000000\] has too many elements/,
  );
});

Deno.test("setNumThreads validates and getNumThreads reports", () => {
  const before = getNumThreads();
  try {
    setNumThreads(1);
    assert.equal(getNumThreads(), 1);
    assert.throws(() => setNumThreads(0), /setNumThreads: expected a positive integer, got 0/);
  } finally {
    setNumThreads(before);
  }
});

Deno.test("ops on non-contiguous inputs free their copies at once when nothing is recorded", () => {
  const x = randn([64, 32]);
  const xt = x.t();
  const before = allocatedBytes();
  const y = noGrad(() => xt.relu());
  const z = xt.sum(0);
  assert.equal(allocatedBytes() - before, (y.numel() + z.numel()) * 4, "only the outputs remain");
  for (const t of [x, xt, y, z]) t.dispose();
});
