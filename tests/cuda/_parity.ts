/**
 * What the kernel parity tests (kernel_parity_test.ts, indexing_parity_test.ts) share: an op run
 * on the same inputs on cpu and on an accelerator, its outputs and gradients held to each other
 * (i32 and bool bit for bit, f32 within relative error 1e-5), and an error a device reports at
 * the next read.
 * @module
 */

import assert from "node:assert/strict";
import { manualSeed, rand, type Tensor } from "../../mod.ts";
import { deviceTest } from "../_harness/devices.ts";
import { maxRelativeError } from "../_harness/close.ts";

/** The largest relative error allowed between f32 results of cpu and an accelerator. */
export const F32_TOL = 1e-5;

/** An op's results read back: each output's dtype, shape and values, and each input's gradient. */
interface Run {
  outputs: { dtype: string; shape: readonly number[]; values: ArrayLike<number> }[];
  grads: (ArrayLike<number> | null)[];
}

/**
 * `fn` on copies of `inputs` (made on cpu) on `device`, f32 inputs requiring grad; when an output
 * does, a fixed random weighting of the outputs is summed and back-propagated, so every element's
 * gradient path runs.
 */
function runOn(
  device: string,
  inputs: Tensor[],
  fn: (...xs: Tensor[]) => Tensor | Tensor[],
): Run {
  const xs = inputs.map((t) => {
    const c = t.detach().to(device);
    return t.dtype === "f32" ? c.requiresGrad_(true) : c;
  });
  const made = fn(...xs);
  const ys = Array.isArray(made) ? made : [made];
  const weighted = ys.filter((y) => y.requiresGrad).map((y, i) => {
    manualSeed(100 + i);
    return y.mul(rand(y.shape, { low: 0.5, high: 1.5 }).to(device)).sum();
  });
  if (weighted.length > 0) weighted.reduce((a, b) => a.add(b)).backward();
  return {
    outputs: ys.map((y) => ({ dtype: y.dtype, shape: y.shape, values: y.toArray() })),
    grads: xs.map((x) => x.requiresGrad ? (x.grad?.toArray() ?? null) : null),
  };
}

/**
 * Asserts f32 `actual` within {@linkcode F32_TOL} of `expected` (relative to its largest
 * magnitude), with NaN and the infinities at the same places.
 */
export function assertCloseF32(
  actual: ArrayLike<number>,
  expected: ArrayLike<number>,
  what: string,
): void {
  assert.equal(actual.length, expected.length, `${what}: lengths differ`);
  let special = false;
  for (let i = 0; i < expected.length; i++) {
    const got = actual[i], want = expected[i];
    if (Number.isFinite(got) && Number.isFinite(want)) continue;
    assert.ok(Object.is(got, want), `${what}: element ${i} is ${got}, on cpu ${want}`);
    special = true;
  }
  // The relative error of the finite elements (the others are equal).
  const finite = (a: ArrayLike<number>) =>
    special ? Array.from(a, (v) => Number.isFinite(v) ? v : 0) : a;
  const err = maxRelativeError(finite(actual), finite(expected));
  assert.ok(err <= F32_TOL, `${what}: rel err ${err}`);
}

/**
 * Declares a test that runs `fn` on the same inputs on cpu and on each accelerator: outputs of
 * the same dtypes and shapes, i32 and bool ones bit-identical, f32 ones and every f32 input's
 * gradient within {@linkcode F32_TOL}.
 *
 * @param name What `fn` does, device-neutral.
 * @param inputs Makes the inputs on cpu (seeded the same for both runs).
 * @param fn The op, returning one output or several.
 */
export function parity(
  name: string,
  inputs: () => Tensor[],
  fn: (...xs: Tensor[]) => Tensor | Tensor[],
): void {
  deviceTest(`${name}: the accelerator matches cpu`, (device) => {
    manualSeed(7);
    const xs = inputs();
    const cpu = runOn("cpu", xs, fn), gpu = runOn(device, xs, fn);
    assert.equal(gpu.outputs.length, cpu.outputs.length);
    cpu.outputs.forEach((want, i) => {
      const got = gpu.outputs[i], what = `${name}: output ${i}`;
      assert.deepEqual([got.dtype, got.shape], [want.dtype, want.shape], what);
      if (want.dtype === "f32") assertCloseF32(got.values, want.values, what);
      else assert.deepEqual(got.values, want.values, `${what} (${want.dtype}) differs`);
    });
    cpu.grads.forEach((want, i) => {
      const got = gpu.grads[i];
      assert.equal(got === null, want === null, `${name}: gradient ${i} on one device only`);
      if (want !== null) assertCloseF32(got!, want, `${name}: gradient of input ${i}`);
    });
  });
}

/**
 * Asserts that `make` fails with `message` on cpu at once, and on an accelerator as a device
 * does: the launch returns, and the next read (`toArray`) throws, once; the device stays usable.
 *
 * @param device The accelerator.
 * @param synchronize Its family's `synchronize`.
 * @param make Issues the op on the device it is given, returning its output.
 * @param message What both devices say (the accelerator adds where it found it).
 */
export function assertReportedAtRead(
  device: string,
  synchronize: (device: string) => void,
  make: (device: string) => Tensor,
  message: RegExp,
): void {
  assert.throws(() => make("cpu"), message, "cpu refuses it at the call");
  const out = make(device);
  assert.throws(() => out.toArray(), message, "the accelerator reports it at the next read");
  synchronize(device);
}
