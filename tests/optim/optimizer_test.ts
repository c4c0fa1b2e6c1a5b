/**
 * SGD and AdamW against PyTorch: five steps from the same parameters with the same gradients
 * (optim.json), every case of each.
 * @module
 */

import assert from "node:assert/strict";
import { nn, tidy } from "../../mod.ts";
import {
  assertClose,
  type FixtureTensor,
  fromFixture,
  loadCases,
  optimizerFromFixture,
} from "../_harness/fixtures.ts";

interface OptimCase {
  name: string;
  op: "SGD" | "AdamW";
  args: Record<string, unknown>;
  params: Record<string, FixtureTensor>;
  steps: { grads: Record<string, FixtureTensor>; params: Record<string, FixtureTensor> }[];
}

type ParamSet = Record<string, nn.Parameter>;

const optimCases = loadCases<OptimCase | { op: "cosineWithWarmup" }>("optim.json");

for (const c of optimCases) {
  if (c.op === "cosineWithWarmup") continue;
  Deno.test(`${c.op} follows PyTorch's trajectory for 5 steps: ${c.name}`, () => {
    tidy(() => {
      const params: ParamSet = {};
      for (const [name, t] of Object.entries(c.params)) {
        params[name] = new nn.Parameter(fromFixture(t));
      }
      const opt = optimizerFromFixture(c.op, Object.values(params), c.args);
      assert.equal(c.steps.length, 5);
      c.steps.forEach((step, i) => {
        opt.zeroGrad();
        for (const [name, g] of Object.entries(step.grads)) params[name].grad = fromFixture(g);
        opt.step();
        for (const [name, expected] of Object.entries(step.params)) {
          assertClose(params[name], expected, `${c.name} step ${i + 1} ${name}`);
        }
      });
    });
  });
}
