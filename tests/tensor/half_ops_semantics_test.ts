// What ops do with bf16 and f16 tensors besides their values (half_ops_test.ts has those):
// PyTorch's type promotion, comparisons, data movement, in-place ops, gradients' dtypes,
// Module.to(dtype) and optimizers on half parameters.

import assert from "node:assert/strict";
import { cat, F, nn, optim, stack, type Tensor, tensor, where } from "../../mod.ts";
import { deviceTest } from "../_harness/devices.ts";

const bf = (values: number[], shape?: number[]) => tensor(values, shape).to("bf16");
const values = (t: Tensor) => Array.from(t.to("f32").toArray() as Float32Array);

Deno.test("type promotion of half operands follows torch.result_type", () => {
  const a = bf([1, 2, 3]), h = tensor([1, 2, 3]).to("f16");
  assert.equal(a.add(a).dtype, "bf16");
  assert.equal(h.mul(h).dtype, "f16");
  assert.equal(a.add(tensor([1, 2, 3])).dtype, "f32");
  assert.equal(a.add(h).dtype, "f32");
  assert.equal(a.mul(2.5).dtype, "bf16");
  assert.equal(a.add(tensor([1, 2, 3], [3], { dtype: "i32" })).dtype, "bf16");
  assert.equal(tensor([1, 2, 3], [3], { dtype: "i32" }).mul(h).dtype, "f16");
  // A 0-d f32 tensor does not widen a half tensor with dimensions (it does a 0-d one).
  assert.equal(a.add(tensor(1.5)).dtype, "bf16");
  assert.equal(bf([1], []).add(tensor([1.5])).dtype, "f32");
});

Deno.test("a number next to a half tensor rounds where PyTorch rounds it", () => {
  const x = bf([1.0]);
  // 0.3 is 0.30078125 in bf16: an addend rounds first, a factor does not.
  assert.deepEqual(values(x.add(0.3)), [1.296875]);
  assert.deepEqual(values(x.mul(0.3)), [0.30078125]);
  assert.equal(bf([0.1]).eq(0.1).item(), 1);
  assert.equal(bf([0.1]).lt(0.1).item(), 0);
});

Deno.test("comparisons of half tensors give bool", () => {
  const a = bf([1, 2, 3]), b = tensor([1, 0, 5]).to("f16");
  assert.equal(a.gt(b).dtype, "bool");
  assert.deepEqual(Array.from(a.gt(b).toArray()), [0, 1, 0]);
  assert.deepEqual(Array.from(a.eq(tensor([1, 2, 4])).toArray()), [1, 1, 0]);
});

Deno.test("reductions of a half tensor keep its dtype; argmax gives i32", () => {
  const x = bf([1, 5, 2, 8], [2, 2]);
  assert.equal(x.sum().dtype, "bf16");
  assert.deepEqual(values(x.sum(0)), [3, 13]);
  assert.equal(x.mean().dtype, "bf16");
  assert.equal(x.max().dtype, "bf16");
  const { values: v, indices } = x.max(1);
  assert.deepEqual([v.dtype, indices.dtype], ["bf16", "i32"]);
  assert.deepEqual(values(v), [5, 8]);
  assert.equal(x.argmax().dtype, "i32");
  assert.equal(x.var().dtype, "bf16");
});

Deno.test("data movement keeps half values exactly and gradients flow back in the half dtype", () => {
  const x = bf([1.5, -2.25, 3.125, 4], [2, 2]).requiresGrad_();
  const parts = [
    x.transpose(0, 1).contiguous(),
    cat([x, x], 0),
    stack([x, x], 1),
    x.narrow(1, 1, 1),
    where(x.gt(0), x, 0.3),
    x.maskedFill(x.lt(0), -1),
    x.tril(),
    x.gather(1, tensor([[1], [0]], undefined, { dtype: "i32" })),
    x.reshape([4]).indexSelect(0, tensor([3, 0], [2], { dtype: "i32" })),
  ];
  for (const p of parts) assert.equal(p.dtype, "bf16");
  assert.deepEqual(values(parts[4]), [1.5, 0.30078125, 3.125, 4]);
  assert.deepEqual(values(parts[3]), [-2.25, 4]);
  parts.map((p) => p.to("f32").sum()).reduce((a, b) => a.add(b)).backward();
  assert.equal(x.grad!.dtype, "bf16");
  assert.equal(cat([x, tensor([[0, 0]])], 0).dtype, "f32");
});

Deno.test("a leaf's gradient takes its dtype: f32 weights get f32 gradients through bf16 math", () => {
  const w = tensor([[1, 2], [3, 4]], undefined, { requiresGrad: true });
  const x = bf([1, -1, 0.5, 2], [2, 2]);
  const y = x.matmul(w.to("bf16")).sum();
  assert.equal(y.dtype, "bf16");
  y.backward();
  assert.equal(w.grad!.dtype, "f32");
  assert.deepEqual(values(w.grad!), [1.5, 1.5, 1, 1]);
  // A second backward accumulates (in f32 and rounded once for a half leaf).
  const h = bf([1, 2]).requiresGrad_();
  h.mul(3).sum().backward();
  h.mul(3).sum().backward();
  assert.deepEqual([h.grad!.dtype, ...values(h.grad!)], ["bf16", 6, 6]);
});

Deno.test("in-place ops on half tensors compute in f32 and round once", () => {
  const x = bf([1, 2, 3]);
  x.add_(0.5);
  x.mul_(3);
  assert.deepEqual(values(x), [4.5, 7.5, 10.5]);
  x.add_(tensor([1, 1, 1]), 0.5);
  x.sub_(bf([1, 1, 1]));
  x.clamp_(0, 10);
  assert.deepEqual(values(x), [4, 7, 10]);
  x.copy_(tensor([0.1, 0.2, 0.3]));
  assert.deepEqual(values(x), [0.10009765625, 0.2001953125, 0.30078125]);
  x.fill_(0.3);
  assert.deepEqual(values(x), [0.30078125, 0.30078125, 0.30078125]);
  assert.equal(x.dtype, "bf16");
});

Deno.test("module.to(dtype) and bfloat16() convert float parameters and buffers, keep integers", () => {
  const model = new nn.Sequential(new nn.Linear(3, 4), new nn.LayerNorm(4));
  model.registerBuffer("steps", tensor([1], [1], { dtype: "i32" }));
  model.registerBuffer("scale", tensor([2]));
  const before = model.parameters()[0];
  model.bfloat16();
  for (const p of model.parameters()) {
    assert.equal(p.dtype, "bf16");
    assert.ok(p instanceof nn.Parameter && p.requiresGrad);
  }
  assert.notEqual(model.parameters()[0], before);
  const buffers = Object.fromEntries(model.namedBuffers());
  assert.equal(buffers.steps.dtype, "i32");
  assert.equal(buffers.scale.dtype, "bf16");
  const y = model.forward(bf([1, 2, 3, 4, 5, 6], [2, 3]));
  assert.equal(y.dtype, "bf16");
  y.to("f32").sum().backward();
  for (const p of model.parameters()) assert.equal(p.grad!.dtype, "bf16");
  model.float();
  assert.ok(model.parameters().every((p) => p.dtype === "f32"));
});

Deno.test("SGD and AdamW update bf16 parameters in f32 with f32 state, rounding once a step", () => {
  for (
    const make of [
      (p: Tensor[]) => new optim.SGD(p, { lr: 0.1, momentum: 0.9 }),
      (p: Tensor[]) => new optim.AdamW(p, { lr: 0.1 }),
    ]
  ) {
    const half = new nn.Parameter(bf([1, -2, 3]));
    const full = new nn.Parameter(tensor([1, -2, 3]));
    const [oh, of] = [make([half]), make([full])];
    for (let step = 0; step < 3; step++) {
      for (const p of [half, full]) {
        p.grad = null;
        F.mseLoss(p.to("f32"), tensor([0, 0, 0])).backward();
      }
      oh.step();
      of.step();
      // The bf16 parameter is the f32 update of its own values, rounded: within one bf16 ulp.
      values(half).forEach((v, i) => assert.ok(Math.abs(v - values(full)[i]) <= 2 ** -6 * 4));
    }
    assert.equal(half.dtype, "bf16");
  }
});

deviceTest("bf16 ops and their gradients on the device match the CPU's bits", (device) => {
  const x = bf([0.5, -1.25, 2, 3.5, -0.75, 1], [2, 3]);
  const w = bf([1, 0.5, -1, 2, 0.25, -0.5], [2, 3]);
  const run = (dev: string) => {
    const xs = x.to(dev), ws = w.to(dev).requiresGrad_();
    const y = F.gelu(F.linear(xs, ws)).softmax(-1).sum(0);
    y.to("f32").sum().backward();
    return [values(y.to("cpu")), values(ws.grad!.to("cpu"))];
  };
  assert.deepEqual(run(device), run("cpu"));
});

Deno.test("clipGradNorm takes bf16 gradients: the norm in f32, the scaling in place in bf16", () => {
  const p = new nn.Parameter(bf([3, 4]));
  p.grad = bf([3, 4]);
  const norm = nn.utils.clipGradNorm([p], 1);
  assert.equal(norm, 5);
  assert.equal(p.grad.dtype, "bf16");
  assert.deepEqual(values(p.grad), [0.6015625, 0.80078125]);
});

Deno.test("an expanded half tensor's gradient sums back over the repeats in f32, rounded once", () => {
  const x = bf([1, 2], [2, 1]).requiresGrad_();
  const y = x.expand(2, 3).mul(bf([1, 2, 3.5]));
  y.to("f32").sum().backward();
  assert.equal(x.grad!.dtype, "bf16");
  assert.deepEqual(values(x.grad!), [6.5, 6.5]);
  const z = bf([1, 2, 3]).requiresGrad_();
  z.expand(1, 3).to("f32").sum().backward();
  assert.deepEqual(values(z.grad!), [1, 1, 1]);
});

Deno.test("a sum over several dimensions of a half tensor rounds once", () => {
  // 256 + 1 + 1: rounding after each dimension would lose each 1 (bf16 keeps 8 bits at 256).
  const x = bf([256, 1, 1, 0], [2, 2, 1]);
  assert.deepEqual(values(x.sum([0, 1])), [258]);
  assert.deepEqual(values(x.mean([0, 1], true).mul(4)), [258]);
});
