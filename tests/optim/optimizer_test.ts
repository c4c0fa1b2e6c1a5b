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

/** after - before, in float64. */
function update(before: ArrayLike<number>, after: ArrayLike<number>): number[] {
  return Array.from(after, (v, j) => v - before[j]);
}

/**
 * Each step's update is compared with PyTorch's on its own, not only the parameters after it: the
 * parameters' 1e-5 relative tolerance is as large as one step of AdamW's decoupled weight decay
 * (lr * weightDecay = 1e-5), while the update is 1e-3 and its weight-decay part 1e-5 * p. The
 * absolute term is a few float32 ulps of parameters of magnitude ~1, the rounding of two updates
 * computed in a different order.
 */
const UPDATE_TOLERANCE = { rtol: 1e-4, atol: 3e-7 };

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
        const before = Object.fromEntries(
          Object.entries(params).map(([name, p]) => [name, p.toArray().slice()]),
        );
        opt.step();
        for (const [name, expected] of Object.entries(step.params)) {
          assertClose(params[name], expected, `${c.name} step ${i + 1} ${name}`);
          const theirsBefore = (i === 0 ? c.params : c.steps[i - 1].params)[name].data;
          assertClose(
            update(before[name], params[name].toArray()),
            update(theirsBefore, expected.data),
            `${c.name} step ${i + 1} ${name} update (after - before)`,
            UPDATE_TOLERANCE,
          );
        }
      });
    });
  });
}
