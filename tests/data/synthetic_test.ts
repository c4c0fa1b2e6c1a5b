import assert from "node:assert/strict";
import { getRngState, rand } from "../../mod.ts";
import { SyntheticRegression } from "../../src/data/mod.ts";

Deno.test("SyntheticRegression defaults to 2048 samples of 20 inputs and 1 target in [0, 1)", () => {
  using data = new SyntheticRegression();
  assert.equal(data.length, 2048);
  const [x, y] = data.tensors;
  assert.deepEqual([x.shape, y.shape, x.dtype, y.dtype], [[2048, 20], [2048, 1], "f32", "f32"]);
  for (const values of [x.toArray(), y.toArray()]) {
    assert.ok(values.every((v) => v >= 0 && v < 1));
    const mean = Array.from(values).reduce((a, b) => a + b, 0) / values.length;
    assert.ok(Math.abs(mean - 0.5) < 0.05, `mean ${mean}`);
  }
  const [xi, yi] = data.get(5);
  assert.deepEqual([xi.shape, yi.shape], [[20], [1]]);
  assert.deepEqual(xi.toArray(), x.toArray().subarray(100, 120));
});

Deno.test("SyntheticRegression is a function of its seed and leaves the global generator alone", () => {
  const before = getRngState();
  using a = new SyntheticRegression({ size: 64, inputs: 3, outputs: 2, seed: 11 });
  using b = new SyntheticRegression({ size: 64, inputs: 3, outputs: 2, seed: 11 });
  using c = new SyntheticRegression({ size: 64, inputs: 3, outputs: 2, seed: 12 });
  assert.deepEqual(getRngState(), before);
  rand([5]);
  using d = new SyntheticRegression({ size: 64, inputs: 3, outputs: 2, seed: 11 });
  const all = (s: SyntheticRegression) => s.getBatch(Int32Array.from({ length: 64 }, (_, i) => i));
  const [xa, ya] = all(a), [xb, yb] = all(b), [xc] = all(c), [xd] = all(d);
  assert.deepEqual([xa.shape, ya.shape], [[64, 3], [64, 2]]);
  assert.deepEqual(xa.toArray(), xb.toArray());
  assert.deepEqual(ya.toArray(), yb.toArray());
  assert.deepEqual(xa.toArray(), xd.toArray());
  assert.notDeepEqual(xa.toArray(), xc.toArray());
  assert.notDeepEqual(xa.toArray().subarray(0, 128), ya.toArray());
});

Deno.test("SyntheticRegression refuses negative sizes and seeds", () => {
  assert.throws(() => new SyntheticRegression({ size: -1 }), /size -1 is not a non-negative/);
  assert.throws(() => new SyntheticRegression({ seed: 1.5 }), /seed 1.5/);
});
