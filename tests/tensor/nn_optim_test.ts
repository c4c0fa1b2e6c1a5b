/**
 * nn and optim against PyTorch: SGD/AdamW trajectories and the cosine-with-warmup schedule
 * (optim.json), an MLP's forward, backward and training steps (mlp.json), and the default
 * initialisations (init.json).
 * @module
 */

import assert from "node:assert/strict";
import { F, manualSeed, nn, optim, type Tensor, tidy } from "../../mod.ts";
import { assertClose, type FixtureTensor, fromFixture, loadCases } from "./_fixtures.ts";

// ---------------------------------------------------------------- optim.json

interface OptimCase {
  name: string;
  op: "SGD" | "AdamW";
  args: Record<string, unknown>;
  params: Record<string, FixtureTensor>;
  steps: { grads: Record<string, FixtureTensor>; params: Record<string, FixtureTensor> }[];
}

interface ScheduleCase {
  name: string;
  op: "cosineWithWarmup";
  args: { baseLr: number; warmupSteps: number; totalSteps: number; minLr: number };
  lrAtStep: number[];
}

type ParamSet = Record<string, nn.Parameter>;

function makeOptimizer(op: string, params: nn.Parameter[], args: Record<string, unknown>) {
  if (op === "SGD") return new optim.SGD(params, args as unknown as optim.SGDOptions);
  if (op === "AdamW") return new optim.AdamW(params, args as optim.AdamWOptions);
  throw new Error(`unknown optimizer "${op}" in the fixture`);
}

const optimCases = loadCases<OptimCase | ScheduleCase>("optim.json");

for (const c of optimCases) {
  if (c.op === "cosineWithWarmup") continue;
  Deno.test(`${c.op} follows PyTorch's trajectory for 5 steps: ${c.name}`, () => {
    tidy(() => {
      const params: ParamSet = {};
      for (const [name, t] of Object.entries(c.params)) {
        params[name] = new nn.Parameter(fromFixture(t));
      }
      const opt = makeOptimizer(c.op, Object.values(params), c.args);
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

const schedule = optimCases.find((c): c is ScheduleCase => c.op === "cosineWithWarmup");

Deno.test("cosineWithWarmup gives PyTorch's learning rate at every step", () => {
  assert.ok(schedule, "optim.json has a cosineWithWarmup case");
  const { baseLr, ...options } = schedule.args;
  assert.equal(schedule.lrAtStep.length, options.totalSteps + 1);
  schedule.lrAtStep.forEach((lr, step) => {
    assertClose([optim.cosineWithWarmup(step, baseLr, options)], [lr], `lr at step ${step}`, {
      rtol: 1e-12,
      atol: 0,
    });
  });
  assert.equal(optim.cosineWithWarmup(options.totalSteps + 5, baseLr, options), options.minLr);
});

Deno.test("CosineWithWarmup sets the optimizer's lr for each step", () => {
  assert.ok(schedule);
  tidy(() => {
    const { baseLr, ...options } = schedule.args;
    const p = new nn.Parameter(fromFixture({ shape: [2], dtype: "f32", data: [1, 2] }));
    const opt = new optim.SGD([p], { lr: baseLr });
    const scheduler = new optim.CosineWithWarmup(opt, options);
    schedule.lrAtStep.forEach((lr, step) => {
      assertClose(scheduler.getLastLr(), [lr], `lr after ${step} scheduler steps`, {
        rtol: 1e-12,
        atol: 0,
      });
      opt.step();
      scheduler.step();
    });
  });
});

Deno.test("CosineWithWarmup built after optimizer.loadStateDict decays from the original lr (initialLr)", () => {
  tidy(() => {
    const options = { warmupSteps: 2, totalSteps: 10 };
    const p = new nn.Parameter(fromFixture({ shape: [2], dtype: "f32", data: [1, 2] }));
    const opt = new optim.SGD([p], { lr: 0.1 });
    const scheduler = new optim.CosineWithWarmup(opt, options);
    for (let step = 0; step < 4; step++) scheduler.step();
    const saved = opt.stateDict();
    const group = saved.paramGroups[0] as { lr: number; initialLr?: number };
    assert.equal(group.initialLr, 0.1, "initialLr travels in the state dict");
    assert.ok(group.lr < 0.1);

    const resumed = new optim.SGD([p], { lr: 0.1 });
    resumed.loadStateDict(saved);
    const again = new optim.CosineWithWarmup(resumed, options);
    again.loadStateDict(scheduler.stateDict());
    assert.deepEqual(again.getLastLr(), scheduler.getLastLr());
    scheduler.step();
    again.step();
    assert.deepEqual(again.getLastLr(), scheduler.getLastLr());
    assert.equal(again.getLastLr()[0], optim.cosineWithWarmup(5, 0.1, options));
  });
});

// ---------------------------------------------------------------- mlp.json

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
      const opt = makeOptimizer(run.op, model.parameters(), run.args);
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

// ---------------------------------------------------------------- init.json

interface Statistics {
  distribution: "uniform" | "normal" | "constant";
  shape: number[];
  bound?: number;
  mean?: number;
  std?: number;
  value?: number;
}

interface InitCase {
  name: string;
  op: "linearInit" | "layerNormInit" | "embeddingInit";
  args: Record<string, number & number[]>;
  weight: Statistics;
  bias?: Statistics;
}

/**
 * Checks a tensor against its distribution: the shape, the range, and the sample mean and
 * standard deviation within five standard errors (a deterministic check: the RNG is seeded).
 */
function checkDistribution(t: Tensor, s: Statistics, what: string): void {
  assert.deepEqual(t.shape, s.shape, `${what} shape`);
  const data = t.toArray();
  const n = data.length;
  if (s.distribution === "constant") {
    assert.ok(data.every((v) => v === s.value), `${what}: every element is ${s.value}`);
    return;
  }
  let sum = 0, sumSq = 0, maxAbs = 0;
  for (const v of data) {
    sum += v;
    sumSq += v * v;
    maxAbs = Math.max(maxAbs, Math.abs(v));
  }
  const mean = sum / n, std = Math.sqrt(sumSq / n - mean * mean);
  const sigma = s.std!;
  // Excess kurtosis: -1.2 for a uniform distribution, 0 for a normal one.
  const kurtosis = s.distribution === "uniform" ? 1.8 : 3;
  assert.ok(
    Math.abs(mean - s.mean!) <= 5 * sigma / Math.sqrt(n),
    `${what}: mean ${mean}, expected ${s.mean} (n = ${n})`,
  );
  const relStd = Math.abs(std / sigma - 1);
  assert.ok(
    relStd <= 5 * Math.sqrt((kurtosis - 1) / (4 * n)),
    `${what}: std ${std}, expected ${sigma} (${(relStd * 100).toFixed(2)}% off, n = ${n})`,
  );
  if (s.distribution === "uniform") {
    assert.ok(maxAbs <= s.bound!, `${what}: max |value| ${maxAbs} is above the bound ${s.bound}`);
    if (n >= 1000) assert.ok(maxAbs > 0.99 * s.bound!, `${what}: max |value| ${maxAbs}`);
  } else {
    assert.ok(maxAbs < 7 * sigma, `${what}: max |value| ${maxAbs}`);
  }
}

for (const c of loadCases<InitCase>("init.json")) {
  Deno.test(`default initialisation matches PyTorch's distribution: ${c.name}`, () => {
    tidy(() => {
      manualSeed(0);
      let module: nn.Linear | nn.LayerNorm | nn.Embedding;
      if (c.op === "linearInit") {
        module = new nn.Linear(c.args.inFeatures, c.args.outFeatures);
      } else if (c.op === "layerNormInit") {
        module = new nn.LayerNorm(c.args.normalizedShape);
      } else if (c.op === "embeddingInit") {
        module = new nn.Embedding(c.args.numEmbeddings, c.args.embeddingDim);
      } else {
        throw new Error(`${c.name}: unknown init op "${(c as InitCase).op}"`);
      }
      checkDistribution(module.weight!, c.weight, `${c.name} weight`);
      if (c.bias) {
        assert.ok("bias" in module && module.bias, `${c.name} has a bias`);
        checkDistribution(module.bias, c.bias, `${c.name} bias`);
      }
      for (const p of module.parameters()) {
        assert.ok(p.requiresGrad && p.persistent && p.isLeaf, `${c.name} parameters are leaves`);
      }
    });
  });
}
