/**
 * The optimizers refuse hyperparameters and state numbers that would train into NaN, from their
 * constructors and from `loadStateDict` (a state dict read from a file may hold anything), naming
 * the field and the value, and leave their state as it was.
 * @module
 */

import assert from "node:assert/strict";
import { nn, optim, tensor, tidy } from "../../mod.ts";

Deno.test("SGD, AdamW and Adam constructors refuse bad hyperparameters, naming each", () => {
  tidy(() => {
    const p = new nn.Parameter(tensor([0, 0]));
    const cases: [() => unknown, RegExp][] = [
      [
        () => new optim.SGD([p], { lr: -5 }),
        /^RangeError: SGD: invalid learning rate: -5 \(Too small/,
      ],
      [() => new optim.SGD([p], { lr: NaN }), /^RangeError: SGD: invalid learning rate: NaN/],
      [() => new optim.SGD([p], { lr: 0.1, momentum: 1e308 }), /invalid momentum value: 1e\+308/],
      [() => new optim.SGD([p], { lr: 0.1, weightDecay: -1 }), /invalid weightDecay value: -1/],
      [
        () => new optim.SGD([{ params: [p], lr: Infinity }], { lr: 0.1 }),
        /^RangeError: SGD: invalid learning rate: Infinity/,
      ],
      [() => new optim.AdamW([p], { eps: 0 }), /^RangeError: AdamW: invalid epsilon value: 0/],
      [
        () => new optim.AdamW([p], { betas: [0.9, 1] }),
        /^RangeError: AdamW: invalid beta parameter at index 1: 1 \(Too big/,
      ],
      [
        () => new optim.Adam([p], { betas: [-0.1, 0.9] }),
        /^RangeError: Adam: invalid beta parameter at index 0/,
      ],
    ];
    for (const [make, expected] of cases) assert.throws(make, expected);
    assert.ok(new optim.SGD([p], { lr: 0, momentum: 0.99 }), "lr 0 and momentum below 1 pass");
  });
});

/** A state dict of an SGD with momentum after one step, as JSON would carry it. */
function trainedSGD(p: nn.Parameter): optim.SGD {
  const opt = new optim.SGD([p], { lr: 0.1, momentum: 0.9 });
  p.grad = tensor([1, 1]);
  opt.step();
  return opt;
}

Deno.test("loadStateDict refuses each bad hyperparameter or step count, naming the field and the value", () => {
  tidy(() => {
    const p = new nn.Parameter(tensor([0, 0]));
    const sgd = trainedSGD(p);
    const adamw = new optim.AdamW([p], { lr: 1e-3 });
    adamw.step();
    type Edit = (d: optim.OptimizerStateDict<Record<string, unknown> & { lr: number }>) => void;
    const cases: [optim.Optimizer<{ lr: number }>, Edit, RegExp][] = [
      [sgd, (d) => (d.paramGroups[0].lr = -5), /paramGroups\.0\.lr: Too small.* \(got -5\)$/],
      [sgd, (d) => (d.paramGroups[0].lr = "abc" as never), /paramGroups\.0\.lr: .*\(got "abc"\)$/],
      [
        sgd,
        (d) => (d.paramGroups[0].momentum = 1e308),
        /paramGroups\.0\.momentum: Too big.*1e\+308/,
      ],
      [sgd, (d) => (d.paramGroups[0].weightDecay = -1), /paramGroups\.0\.weightDecay: Too small/],
      [sgd, (d) => (d.paramGroups[0].initialLr = -1), /paramGroups\.0\.initialLr: Too small/],
      [adamw, (d) => (d.paramGroups[0].eps = 0), /paramGroups\.0\.eps: Too small.* \(got 0\)$/],
      [adamw, (d) => (d.paramGroups[0].betas = [1, 0.999]), /paramGroups\.0\.betas\.0: Too big/],
      [adamw, (d) => (d.state[0].step = -1), /state\.0\.step: Too small.* \(got -1\)$/],
      [adamw, (d) => (d.state[0].step = 1.5), /state\.0\.step: .*expected int.* \(got 1\.5\)$/],
      [adamw, (d) => (d.state[0].step = Infinity), /state\.0\.step: .*\(got Infinity\)$/],
    ];
    for (const [opt, edit, expected] of cases) {
      const dict = opt.stateDict();
      const before = JSON.stringify(dict.paramGroups);
      // stateDict copies each group and each parameter's state: the edit stays in `dict`.
      edit(dict as never);
      const name = opt.constructor.name;
      assert.throws(() => opt.loadStateDict(dict), (e: Error) => {
        assert.ok(e instanceof RangeError, `${e}`);
        assert.ok(e.message.startsWith(`${name}.loadStateDict: `), e.message);
        assert.match(e.message, expected);
        return true;
      });
      assert.equal(JSON.stringify(opt.stateDict().paramGroups), before, "nothing was loaded");
    }
    const fresh = new optim.SGD([p], { lr: 1, momentum: 0.5 });
    fresh.loadStateDict(sgd.stateDict());
    assert.deepEqual([fresh.paramGroups[0].lr, fresh.paramGroups[0].momentum], [0.1, 0.9]);
  });
});
