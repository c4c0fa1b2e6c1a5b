// randint: torch.randint's two forms, i32 output from the global generator, repeatable under
// manualSeed, the same numbers on every device and from the host twin the data loaders use.
import assert from "node:assert/strict";
import { manualSeed, randint } from "../../mod.ts";
import { randintNumbers } from "../../src/tensor/random.ts";
import { deviceTest } from "../_harness/devices.ts";

Deno.test("randint(low, high, shape) draws i32 values in [low, high) of that shape", () => {
  manualSeed(7);
  const t = randint(-3, 5, [4, 250]);
  assert.equal(t.dtype, "i32");
  assert.deepStrictEqual(t.shape, [4, 250]);
  const values = t.toArray();
  assert.ok(values.every((v) => v >= -3 && v < 5), "a value outside [-3, 5)");
  // Every value of the range turns up in 1000 draws of 8 (each missing with chance (7/8)^1000).
  assert.equal(new Set(values).size, 8);
});

Deno.test("randint(high, shape) is randint(0, high, shape), and manualSeed repeats a draw", () => {
  manualSeed(1234);
  const a = randint(50, [64]).toArray();
  const b = randint(50, [64]).toArray();
  manualSeed(1234);
  assert.deepStrictEqual(randint(0, 50, [64]).toArray(), a);
  assert.deepStrictEqual(randint(0, 50, [64]).toArray(), b);
  assert.notDeepStrictEqual(a, b, "the second draw must move the generator on");
});

Deno.test("randint is uniform: each of 10 values takes about a tenth of 100000 draws", () => {
  manualSeed(99);
  const counts = new Array(10).fill(0);
  for (const v of randint(10, [100_000]).toArray()) counts[v]++;
  // chi-square with 9 degrees of freedom: 27.9 is its 0.999 quantile.
  const chi2 = counts.reduce((s, c) => s + (c - 10_000) ** 2 / 10_000, 0);
  assert.ok(chi2 < 27.9, `chi-square ${chi2} over counts ${counts}`);
});

Deno.test("randint covers the whole int32 range, high = 2^31 included", () => {
  manualSeed(3);
  const values = randint(-(2 ** 31), 2 ** 31, [1000]).toArray();
  assert.ok(values.some((v) => v < -(2 ** 30)) && values.some((v) => v > 2 ** 30));
});

Deno.test("the host twin draws the numbers the randint kernel draws, from the same counters", () => {
  manualSeed(2024);
  const kernel = Array.from(randint(17, 1_000_017, [300]).toArray());
  const after = Array.from(randint(5, [10]).toArray());
  manualSeed(2024);
  assert.deepStrictEqual(randintNumbers(17, 1_000_017, 300), kernel);
  assert.deepStrictEqual(randintNumbers(0, 5, 10), after);
  // Past the int32 range (a 9-billion-token file's offsets), values still fill the range.
  const wide = randintNumbers(0, 9e9, 1000);
  assert.ok(wide.every((v) => Number.isInteger(v) && v >= 0 && v < 9e9));
  assert.ok(wide.some((v) => v > 2 ** 32), "no value above 2^32 in 1000 draws below 9e9");
});

deviceTest("randint draws on the device the values it draws on cpu", (device) => {
  manualSeed(11);
  const cpu = randint(-100, 100, [3, 37]).toArray();
  manualSeed(11);
  const t = randint(-100, 100, [3, 37], { device });
  assert.equal(t.device, device);
  assert.deepStrictEqual(t.toArray(), cpu);
});

Deno.test("randint refuses bad bounds, shapes and dtypes, naming the value", () => {
  assert.throws(() => randint(5, 5, [2]), /randint: high 5 must be above low 5/);
  assert.throws(() => randint(0, [2]), /randint: high 0 must be above low 0/);
  assert.throws(() => randint(0.5, 4, [2]), /randint: low must be an integer, got 0.5/);
  assert.throws(() => randint(10.5, [2]), /randint: high must be an integer, got 10.5/);
  assert.throws(() => randint(0, 2 ** 31 + 1, [2]), /outside the i32 range/);
  assert.throws(() => randint(4, [2, -1]), /randint/);
  assert.throws(() => randint(4, [1.5]), /randint/);
  // @ts-expect-error: a shape is required
  assert.throws(() => randint(0, 4), /randint: expected a shape array, got undefined/);
  assert.throws(
    () => randint(4, [2], { dtype: "f32" }),
    /randint: dtrain's randint makes i32 tensors, not f32/,
  );
});
