// run: deno run -A --v8-flags=--expose-gc docs/guide/examples/08_autocast.ts
// expect: 0.1 and 70000 in bf16: 0.10009765625, 70144; in f16: 0.0999755859375, Infinity
// expect: under autocast: linear gives bf16, crossEntropy gives f32
// expect: gradients in f32, the parameters' dtype
// expect-match: bf16 products run on (onednn|f32-sgemm):
import assert from "node:assert/strict";
import { autocast, bf16MatmulBackend, F, nn, tensor } from "../../../mod.ts";

// bf16 keeps f32's 8 exponent bits and 7 of its 23 mantissa bits: f32's range, ~3 digits.
// f16 has 10 mantissa bits but 5 exponent bits: more digits, and nothing above 65,504.
const v = tensor([0.1, 70000]);
const show = (t: typeof v) => Array.from(t.toArray()).join(", ");
console.log(`0.1 and 70000 in bf16: ${show(v.bfloat16())}; in f16: ${show(v.half())}`);

// autocast runs matmul-like ops in bf16 and keeps losses in f32, as torch.autocast does on the CPU.
const model = new nn.Linear(4, 3);
const x = tensor([[1, 2, 3, 4], [4, 3, 2, 1]]);
const loss = autocast({ deviceType: "cpu", dtype: "bf16" }, () => {
  const logits = model.forward(x);
  const l = F.crossEntropy(logits, tensor([0, 2], [2], { dtype: "i32" }));
  console.log(`under autocast: linear gives ${logits.dtype}, crossEntropy gives ${l.dtype}`);
  return l;
});
loss.backward();
assert.equal(model.weight.grad?.dtype, "f32");
console.log(`gradients in ${model.weight.grad?.dtype}, the parameters' dtype`);
const engine = bf16MatmulBackend();
console.log(`bf16 products run on ${engine.name}: ${engine.reason}`);
