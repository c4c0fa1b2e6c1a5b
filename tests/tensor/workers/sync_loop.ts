/**
 * The memory trap (issue 8): trains a small MLP for STEPS steps in one synchronous loop, with no
 * `tidy`, no `dispose` and no `await`, so no FinalizationRegistry callback can run, and prints
 * its memory after step 500 and at the end as one JSON line: the resident set, and the V8 heap
 * (whose complement in the resident set is native memory, tensors' bytes included).
 * @module
 */

import { F, manualSeed, nn, optim, randn, tensor } from "../../../mod.ts";

const steps = Number(Deno.args[0] ?? 10_000);
manualSeed(0);
const model = new nn.Sequential(new nn.Linear(32, 64), new nn.ReLU(), new nn.Linear(64, 10));
const opt = new optim.SGD(model.parameters(), { lr: 0.05, momentum: 0.9 });
const x = randn([64, 32]);
const y = tensor(Int32Array.from({ length: 64 }, (_, i) => i % 10), [64]);

let at500 = Deno.memoryUsage();
let first = 0;
let last = 0;
for (let step = 1; step <= steps; step++) {
  const loss = F.crossEntropy(model.forward(x), y);
  loss.backward();
  opt.step();
  opt.zeroGrad();
  if (step === 1) first = loss.item();
  if (step === 500) at500 = Deno.memoryUsage();
  if (step === steps) last = loss.item();
}
const end = Deno.memoryUsage();
console.log(JSON.stringify({ steps, at500, end, first, last }));
