/**
 * Printing against PyTorch's real `repr` (tests/fixtures/ops2.json `reprs`, with dtrain's names:
 * `dtype=i32`, `gradFn=<...>`, `requiresGrad=True`), through `String(t)` and `Deno.inspect`
 * (what `console.log` prints), and the number formatting behind it.
 * @module
 */

import assert from "node:assert/strict";
import { cat, type Tensor, tensor } from "../../mod.ts";
import { type FixtureTensor, fromFixture } from "../_harness/fixtures.ts";
import { formatExponent, formatFixed } from "../../src/tensor/repr.ts";

interface ReprCase {
  name: string;
  build: "leaf" | "addSelf" | "catSelf";
  input: FixtureTensor;
  requiresGrad: boolean;
  repr: string;
}

const cases = JSON.parse(Deno.readTextFileSync(new URL("../fixtures/ops2.json", import.meta.url)))
  .reprs as ReprCase[];

function build(c: ReprCase): Tensor {
  if (c.build === "leaf") return fromFixture(c.input, c.requiresGrad);
  const leaf = fromFixture(c.input, true);
  return c.build === "addSelf" ? leaf.add(leaf) : cat([leaf, leaf], 1);
}

Deno.test("ops2.json reprs has cases with unique names", () => {
  assert.ok(cases.length >= 20);
  assert.equal(new Set(cases.map((c) => c.name)).size, cases.length);
});

for (const c of cases) {
  Deno.test(`String(t) matches PyTorch's repr: ${c.name}`, () => {
    const t = build(c);
    assert.equal(String(t), c.repr);
    assert.equal(Deno.inspect(t), c.repr, "console.log shows the same text");
  });
}

Deno.test("formatFixed and formatExponent round ties to even like Python's format", () => {
  assert.equal(formatFixed(0.03125, 4), "0.0312");
  assert.equal(formatFixed(-0.03125, 4), "-0.0312");
  assert.equal(formatFixed(0.09375, 4), "0.0938");
  assert.equal(formatFixed(2.5, 0), "2");
  assert.equal(formatFixed(1e21, 0), "1000000000000000000000");
  assert.equal(formatFixed(-0, 4), "-0.0000");
  assert.equal(formatExponent(0, 4), "0.0000e+00");
  assert.equal(formatExponent(9.99995e-5, 4), "9.9999e-05"); // the double just below the tie
  assert.equal(formatExponent(99999.5, 4), "1.0000e+05");
  assert.equal(formatExponent(1e-300, 4), "1.0000e-300");
  assert.equal(formatExponent(Number.NaN, 4), "nan");
  assert.equal(formatFixed(-Infinity, 4), "-inf");
});

Deno.test("non-finite values, other devices and disposed tensors print", () => {
  assert.equal(String(tensor([1, Number.NaN, Infinity])), "tensor([1., nan, inf])");
  assert.equal(String(tensor([0.5, -Infinity])), "tensor([0.5000,   -inf])");
  const t = tensor([1, 2]);
  t.dispose();
  assert.equal(String(t), "tensor(<disposed>, shape=[2], dtype=f32)");
});
