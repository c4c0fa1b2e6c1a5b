/**
 * An 8-16-16-4 ReLU MLP against PyTorch (mlp.json): state-dict names, logits, loss and every
 * gradient, and three SGD and AdamW training steps from PyTorch's initial parameters.
 * @module
 */

import assert from "node:assert/strict";
import { F, nn, type Tensor, tidy } from "../../mod.ts";
import {
  assertClose,
  type FixtureTensor,
  fromFixture,
  loadCases,
  optimizerFromFixture,
} from "../_harness/fixtures.ts";

interface MlpCase {
  name: string;
  args: { layers: number[]; activation: string; loss: string };
  stateDict: Record<string, FixtureTensor>;
  inputs: { x: FixtureTensor; targets: FixtureTensor };
  outputs: { logits: FixtureTensor; loss: FixtureTensor };
  grads: Record<string, FixtureTensor>;
  training: {
    op: string;
    args: Record<string, unknown>;
    steps: { loss: FixtureTensor; params: Record<string, FixtureTensor> }[];
  }[];
}

const [mlp] = loadCases<MlpCase>("mlp.json");

/** The fixture's MLP with PyTorch's initial parameters loaded. */
function loadMlp(): nn.MLP {
  assert.equal(mlp.args.activation, "relu");
  assert.equal(mlp.args.loss, "crossEntropy");
  const model = new nn.MLP(mlp.args.layers);
  const state: Record<string, Tensor> = {};
  for (const [name, t] of Object.entries(mlp.stateDict)) state[name] = fromFixture(t);
  model.loadStateDict(state);
  return model;
}

Deno.test("the MLP's state-dict names are PyTorch's", () => {
  tidy(() => {
    assert.deepEqual(Object.keys(loadMlp().stateDict()), Object.keys(mlp.stateDict));
  });
});

Deno.test("the MLP's logits, loss and every gradient match PyTorch", () => {
  tidy(() => {
    const model = loadMlp();
    const logits = model.forward(fromFixture(mlp.inputs.x));
    assertClose(logits, mlp.outputs.logits, "logits");
    const loss = F.crossEntropy(logits, fromFixture(mlp.inputs.targets));
    assertClose(loss, mlp.outputs.loss, "loss");
    loss.backward();
    const state = model.stateDict();
    assert.deepEqual(Object.keys(mlp.grads).sort(), Object.keys(state).sort());
    for (const [name, expected] of Object.entries(mlp.grads)) {
      assert.ok(state[name].grad !== null, `${name} got no gradient`);
      assertClose(state[name].grad, expected, `grad of ${name}`);
    }
  });
});

for (const run of mlp.training) {
  Deno.test(`the MLP's 3 ${run.op} training steps match PyTorch (loss and parameters)`, () => {
    tidy(() => {
      const model = loadMlp();
      const opt = optimizerFromFixture(run.op, model.parameters(), run.args);
      const x = fromFixture(mlp.inputs.x), targets = fromFixture(mlp.inputs.targets);
      assert.equal(run.steps.length, 3);
      run.steps.forEach((step, i) => {
        tidy(() => {
          opt.zeroGrad();
          const loss = F.crossEntropy(model.forward(x), targets);
          assertClose(loss, step.loss, `${run.op} loss before step ${i + 1}`);
          loss.backward();
          opt.step();
        });
        const state = model.stateDict();
        for (const [name, expected] of Object.entries(step.params)) {
          assertClose(state[name], expected, `${run.op} ${name} after step ${i + 1}`);
        }
      });
    });
  });
}
