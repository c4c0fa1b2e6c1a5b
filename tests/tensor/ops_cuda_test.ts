// Every accelerator op against the CPU: the same inputs on both devices, the outputs and the
// gradients of every input compared (f32 relative error <= 1e-5; bf16 products <= 2e-2). Each
// test runs on the emulated accelerator everywhere and on cuda where a GPU is
// (scripts/gpu_check.sh); elsewhere the cuda one is ignored with the reason in its name.
import assert from "node:assert/strict";
import { cuda, F, manualSeed, nn, optim, rand, randn, type Tensor, tensor } from "../../mod.ts";
import { deviceTest, gpuTest } from "../_harness/devices.ts";
import { maxRelativeError } from "../_harness/close.ts";

const F32_TOL = 1e-5;

/** `fn` on copies of `inputs` (made on cpu) on `device`: its output and every input's gradient. */
function runOn(device: string, inputs: Tensor[], fn: (...xs: Tensor[]) => Tensor, seed: number) {
  const xs = inputs.map((t) => {
    const c = t.detach().to(device);
    return t.dtype === "f32" ? c.requiresGrad_(true) : c;
  });
  manualSeed(seed);
  const y = fn(...xs);
  // A fixed random weighting, so every output element's gradient path is exercised.
  manualSeed(seed + 1);
  const w = rand(y.shape).to(device);
  y.mul(w).sum().backward();
  return {
    y: y.toArray(),
    grads: xs.map((x) => x.requiresGrad ? x.grad!.toArray() : null),
  };
}

/** Declares a test comparing `fn` on each accelerator with cpu. */
function compare(
  name: string,
  inputs: () => Tensor[],
  fn: (...xs: Tensor[]) => Tensor,
  tol = F32_TOL,
): void {
  deviceTest(`${name} on the accelerator matches cpu (rel err <= ${tol})`, (device) => {
    manualSeed(7);
    const xs = inputs();
    const cpu = runOn("cpu", xs, fn, 11), gpu = runOn(device, xs, fn, 11);
    const out = maxRelativeError(gpu.y, cpu.y);
    assert.ok(out <= tol, `${name}: output rel err ${out}`);
    cpu.grads.forEach((g, i) => {
      if (g === null) return;
      const err = maxRelativeError(gpu.grads[i]!, g);
      assert.ok(err <= tol, `${name}: gradient of input ${i} rel err ${err}`);
    });
  });
}

const pos = (shape: number[]) => rand(shape, { low: 0.5, high: 2 });

compare(
  "add/sub/mul/div with broadcasting",
  () => [randn([6, 5]), pos([5])],
  (a, b) => a.add(b).mul(a).sub(b).div(b.add(1)),
);
for (const op of ["relu", "exp", "tanh", "sigmoid", "neg"] as const) {
  compare(op, () => [randn([7, 9])], (x) => x[op]());
}
compare("gelu (erf and tanh)", () => [randn([5, 8])], (x) => x.gelu().add(x.gelu("tanh")));
compare("log, sqrt, pow", () => [pos([4, 6])], (x) => x.log().add(x.sqrt()).add(x.pow(3)));
compare(
  "sum and mean over each dim and all",
  () => [randn([3, 4, 5])],
  (x) => x.sum(1).sum(0).add(x.mean(2).mean(0).sum()).add(x.sum()),
);
compare("softmax and logSoftmax", () => [randn([6, 33])], (x) => x.softmax().add(x.logSoftmax()));
compare(
  "matmul 2-d and batched",
  () => [randn([2, 3, 8]), randn([2, 8, 5])],
  (a, b) => a.matmul(b).add(a.matmul(b.transpose(1, 2).contiguous().transpose(1, 2))),
);
compare(
  "linear with bias",
  () => [randn([9, 16]), randn([12, 16]), randn([12])],
  (x, w, b) => F.linear(x, w, b),
);
compare(
  "transpose made contiguous (strided copy)",
  () => [randn([4, 6, 5])],
  (x) => x.transpose(0, 2).contiguous().mul(2),
);
compare(
  "layerNorm",
  () => [randn([10, 48]), randn([48]), randn([48])],
  (x, w, b) => F.layerNorm(x, [48], w, b),
);
compare("embedding (repeated indices accumulate)", () => [
  tensor([3, 1, 3, 0, 7, 3], [6], { dtype: "i32" }),
  randn([8, 16]),
], (i, w) => F.embedding(i, w));
compare("crossEntropy with an ignored row", () => [
  randn([5, 50]),
  tensor([4, -100, 49, 0, 7], [5], { dtype: "i32" }),
], (x, t) => F.crossEntropy(x, t));
compare("mseLoss", () => [randn([4, 7]), randn([4, 7])], (a, b) => F.mseLoss(a, b));
compare(
  "dropout keeps the cpu's elements (same counter RNG)",
  () => [randn([64, 64])],
  (x) => F.dropout(x, 0.3),
);

deviceTest("argmax and randn match cpu exactly", (device) => {
  manualSeed(5);
  const x = randn([20, 31]);
  assert.deepEqual(x.to(device).argmax(-1).toArray(), x.argmax(-1).toArray());
  manualSeed(9);
  const onGpu = randn([1000], { device }).toArray();
  manualSeed(9);
  assert.ok(maxRelativeError(onGpu, randn([1000]).toArray()) <= F32_TOL);
});

deviceTest(
  "SGD with momentum and AdamW take the same steps on the accelerator and cpu",
  (device) => {
    for (
      const make of [
        (p: nn.Parameter[]) => new optim.SGD(p, { lr: 0.1, momentum: 0.9, weightDecay: 0.01 }),
        (p: nn.Parameter[]) => new optim.AdamW(p, { lr: 0.01, weightDecay: 0.1 }),
      ]
    ) {
      const weights: Float32Array[] = [];
      for (const on of ["cpu", device]) {
        manualSeed(3);
        const model = new nn.Linear(8, 4).to(on);
        const opt = make(model.parameters());
        manualSeed(4);
        const x = randn([16, 8]).to(on);
        for (let step = 0; step < 3; step++) {
          model.forward(x).pow(2).mean().backward();
          opt.step();
          opt.zeroGrad();
        }
        weights.push(model.weight.toArray() as Float32Array);
      }
      assert.ok(maxRelativeError(weights[1], weights[0]) <= F32_TOL);
    }
  },
);

deviceTest("bf16 matmul precision stays within 2e-2 of f32 and is reset", (device, api) => {
  manualSeed(1);
  const a = randn([64, 256]), b = randn([256, 32]);
  const exact = a.matmul(b).toArray();
  api.setMatmulPrecision("medium");
  try {
    assert.equal(api.getMatmulPrecision(), "medium");
    const err = maxRelativeError(a.to(device).matmul(b.to(device)).toArray(), exact);
    // Operands rounded to bf16 (8 significant bits): an error well above f32's, below 2e-2.
    assert.ok(err <= 2e-2 && err > 1e-4, `bf16 rel err ${err}`);
  } finally {
    api.setMatmulPrecision("highest");
  }
  assert.ok(maxRelativeError(a.to(device).matmul(b.to(device)).toArray(), exact) <= F32_TOL);
});

deviceTest("an embedding index out of range is reported at the next read, once", (device, api) => {
  const w = randn([4, 3]).to(device);
  const bad = () => F.embedding(tensor([1, 9], [2], { dtype: "i32" }).to(device), w);
  const reads: [string, (y: Tensor) => unknown][] = [
    ["toArray", (y) => y.toArray()],
    ["item", (y) => y.sum().item()],
    ["synchronize", () => api.synchronize(device)],
  ];
  for (const [how, read] of reads) {
    const y = bad();
    assert.throws(
      () => read(y),
      /embedding: index 9 at position 1 is out of range \[0, 4\)/,
      `${how} reports the error`,
    );
    // The error is reported once; the device stays usable.
    assert.equal(w.sum().item(), w.sum().item());
    api.synchronize(device);
  }
});

deviceTest("mixing accelerator and cpu tensors fails naming both devices", (device) => {
  const x = randn([2, 3]).to(device), host = randn([2, 3]);
  assert.throws(() => x.add(host), {
    message: `add: tensors on different devices (${device} and cpu)`,
  });
  assert.throws(() => host.matmul(x.transpose(0, 1)), /matmul.* different devices \(cpu and /);
});

deviceTest(
  "deviceCount and synchronize describe the devices; an index past them is refused",
  (device, api) => {
    const family = device.split(":")[0];
    assert.ok(api.deviceCount() >= 1);
    api.synchronize(device);
    assert.throws(() => tensor([1]).to(`${family}:${api.deviceCount()}`), /does not exist/);
  },
);

gpuTest("cuda.getDeviceName describes the GPU", () => {
  assert.match(cuda.getDeviceName(0), /\(sm_\d+, \d+ GiB\)$/);
});
