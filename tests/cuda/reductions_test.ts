// The whole-tensor reductions on cuda (sum, mean, mseLoss, crossEntropy's total, max()'s backward
// and sumSquares) at sizes that take many blocks: the same values as the cpu within f32 rounding,
// and the same bits on every run (csrc/cuda/internal.cuh, [Note: two-pass reductions]). Runs where a
// GPU is; elsewhere each test is ignored with the reason in its name.
import assert from "node:assert/strict";
import { F, manualSeed, rand, randn, type Tensor, tensor } from "../../mod.ts";
import { sumSquares } from "../../src/tensor/ops/reduce.ts";
import { gpuTest } from "../_harness/devices.ts";
import { maxRelativeError } from "../_harness/close.ts";

const F32_TOL = 1e-4;
// Above 1024 blocks of 256 threads (PARTIALS_MAX), so each thread of pass one adds several
// elements, and odd, so the last block is partial.
const LONG = 3_000_001;

/** `fn` of `inputs` on cpu and on cuda (twice): outputs and gradients of the f32 inputs. */
function both(inputs: Tensor[], fn: (...xs: Tensor[]) => Tensor) {
  const run = (device: string) => {
    const xs = inputs.map((t) => {
      const c = t.detach().to(device);
      return t.dtype === "f32" ? c.requiresGrad_(true) : c;
    });
    const y = fn(...xs);
    y.backward();
    return [y.toArray(), ...xs.filter((x) => x.requiresGrad).map((x) => x.grad!.toArray())];
  };
  return { cpu: run("cpu"), gpu: run("cuda"), again: run("cuda") };
}

/** Declares a test: cuda matches cpu within `tol`, and two cuda runs agree bit for bit. */
function compare(name: string, inputs: () => Tensor[], fn: (...xs: Tensor[]) => Tensor): void {
  gpuTest(`${name} on cuda matches cpu and repeats exactly`, () => {
    manualSeed(5);
    const { cpu, gpu, again } = both(inputs(), fn);
    cpu.forEach((expected, i) => {
      const err = maxRelativeError(gpu[i], expected);
      assert.ok(err <= F32_TOL, `${name}: ${i === 0 ? "output" : `gradient ${i}`} rel err ${err}`);
      assert.deepEqual(
        again[i],
        gpu[i],
        `${name}: ${i === 0 ? "output" : `gradient ${i}`} differs`,
      );
    });
  });
}

// Positive values, so no cancellation makes a relative error of f32 rounding look large.
const positive = (shape: number[]) => rand(shape, { low: 0.5, high: 2 });

compare("sum() of 3M elements", () => [positive([LONG])], (x) => x.sum());
compare("mean() of 3M elements", () => [positive([LONG])], (x) => x.mean());
compare("sum(1) of 3 rows of 1M", () => [positive([3, 1_000_003])], (x) => x.sum(1).sum());
compare(
  "mseLoss of 2M elements",
  () => [randn([2_000_003]), randn([2_000_003])],
  (a, b) => F.mseLoss(a, b),
);
compare("crossEntropy of 300k rows, some ignored", () => {
  const rows = 300_001, targets = new Int32Array(rows);
  for (let r = 0; r < rows; r++) targets[r] = r % 7 === 0 ? -100 : r % 5;
  return [randn([rows, 5]), tensor(targets, [rows], { dtype: "i32" })];
}, (x, t) => F.crossEntropy(x, t));
compare("max() of 3M elements with tied maxima shares the gradient", () => {
  const values = rand([LONG]).toArray() as Float32Array;
  for (const at of [0, 1_234_567, LONG - 1]) values[at] = 2;
  return [tensor(values, [LONG])];
}, (x) => x.max());

gpuTest("sumSquares of 3M elements on cuda matches cpu and repeats exactly", () => {
  manualSeed(9);
  const x = randn([LONG]);
  const cpu = sumSquares(x).item(), g = x.to("cuda");
  const gpu = sumSquares(g).item();
  assert.ok(Math.abs(gpu - cpu) <= F32_TOL * cpu, `${gpu} vs ${cpu}`);
  assert.equal(sumSquares(g).item(), gpu);
});
