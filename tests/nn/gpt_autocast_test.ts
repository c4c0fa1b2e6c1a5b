// nn.GPT under autocast against nanoGPT's model.py under torch.autocast("cpu", bfloat16)
// (tests/fixtures/autocast_gpt.json, made by gen_autocast.py): the same weights and tokens give
// bf16 logits, an f32 loss and f32 gradients within bf16 rounding of PyTorch's.
import assert from "node:assert/strict";
import { autocast, type nn, type Tensor } from "../../mod.ts";
import {
  type FixtureTensor,
  fromFixture,
  gptFromFixture,
  loadCases,
} from "../_harness/fixtures.ts";

interface AutocastCase {
  name: string;
  config: Record<string, number | boolean>;
  stateDict: Record<string, FixtureTensor>;
  idx: FixtureTensor;
  targets: FixtureTensor;
  logits: FixtureTensor;
  loss: number;
  grads: Record<string, FixtureTensor>;
  f32: { loss: number; grads: Record<string, FixtureTensor> };
  bf16Model: { logits: FixtureTensor; loss: number; grads: Record<string, FixtureTensor> };
}

function fromNanoGPT(c: AutocastCase): nn.GPT {
  return gptFromFixture(c.config, c.stateDict);
}

/** max |got - want| / max |want|: the error at the tensor's scale. */
function relativeError(got: Tensor, want: FixtureTensor): number {
  assert.deepEqual(got.shape, want.shape);
  const values = got.to("f32").toArray() as Float32Array;
  const scale = Math.max(...want.data.map(Math.abs));
  let worst = 0;
  values.forEach((v, i) => worst = Math.max(worst, Math.abs(v - want.data[i])));
  return worst / scale;
}

/**
 * bf16 keeps 8 significant bits: one rounding is a relative error of at most 2^-9. dtrain's ops
 * round as PyTorch's op by op (half_ops_test.ts), except attention, whose CPU flash kernel rounds
 * the probabilities to bf16 before multiplying by v; a rounding that goes the other way then
 * carries on through the layers. Measured: logits 4.6e-3 and 3.0e-3 of their largest magnitude
 * (one bf16 ulp of it; 401 of 512 logits equal bit for bit), losses 1.0e-5 and 3.7e-6 relative
 * (the loss is in f32: cross-entropy is on autocast's fp32 list), gradients 7.4e-3 and 5.4e-3 of
 * each gradient's largest magnitude. The bounds leave 1.7x or more.
 */
const TOLERANCE = { logits: 2 ** -7, loss: 2 ** -12, grads: 2 ** -6 };

/**
 * A model all in bf16 rounds at every op, its residual stream and loss included. Measured:
 * logits 2.3e-3 and 3.0e-3 of their largest magnitude, losses 4.5e-3 and 4.9e-3 relative (one
 * bf16 ulp of a loss near 3.5), gradients 1.3e-2 of their largest magnitude (layer norm weights,
 * sums over every position of bf16 products).
 */
const BF16_MODEL_TOLERANCE = { logits: 2 ** -7, loss: 2 ** -7, grads: 2 ** -5 };

for (const c of loadCases<AutocastCase>("autocast_gpt.json")) {
  Deno.test(`GPT ${c.name} under autocast(cpu, bf16): logits, loss and gradients within bf16 rounding of torch.autocast's`, () => {
    const model = fromNanoGPT(c);
    const { logits, loss } = autocast(
      { deviceType: "cpu", dtype: "bf16" },
      () => model.forward(fromFixture(c.idx), fromFixture(c.targets)),
    );
    assert.equal(logits.dtype, "bf16");
    assert.equal(loss.dtype, "f32");
    const logitsError = relativeError(logits, c.logits);
    const lossError = Math.abs(loss.item() - c.loss) / Math.abs(c.loss);
    loss.backward();
    let gradError = 0, worst = "";
    for (const [name, p] of model.namedParameters()) {
      assert.equal(p.grad!.dtype, "f32", `${name}'s gradient dtype`);
      const e = relativeError(p.grad!, c.grads[name]);
      if (e > gradError) [gradError, worst] = [e, name];
    }
    // How far autocast is from f32 at all, for scale: dtrain's distance to PyTorch's autocast
    // must be well below it.
    const f32Gap = Math.abs(c.f32.loss - c.loss) / Math.abs(c.loss);
    console.log(
      `${c.name}: logits ${logitsError.toExponential(2)}, loss ${lossError.toExponential(2)} ` +
        `(autocast vs f32 in PyTorch: ${f32Gap.toExponential(2)}), grads ${
          gradError.toExponential(2)
        } (${worst})`,
    );
    assert.ok(logitsError <= TOLERANCE.logits, `logits ${logitsError}`);
    assert.ok(lossError <= TOLERANCE.loss, `loss ${lossError}`);
    assert.ok(gradError <= TOLERANCE.grads, `gradient of ${worst}: ${gradError}`);
  });
}

for (const c of loadCases<AutocastCase>("autocast_gpt.json")) {
  Deno.test(`GPT ${c.name} converted with bfloat16(): bf16 logits, loss and gradients within bf16 rounding of nanoGPT's model.to(torch.bfloat16)`, () => {
    const model = fromNanoGPT(c).bfloat16();
    assert.equal(model.transformer.wte.weight, model.lm_head.weight, "still tied");
    const { logits, loss } = model.forward(fromFixture(c.idx), fromFixture(c.targets));
    assert.deepEqual([logits.dtype, loss.dtype], ["bf16", "bf16"]);
    const logitsError = relativeError(logits, c.bf16Model.logits);
    const lossError = Math.abs(loss.to("f32").item() - c.bf16Model.loss) / c.bf16Model.loss;
    loss.backward();
    let gradError = 0, worst = "";
    for (const [name, p] of model.namedParameters()) {
      assert.equal(p.grad!.dtype, "bf16", `${name}'s gradient dtype`);
      const e = relativeError(p.grad!, c.bf16Model.grads[name]);
      if (e > gradError) [gradError, worst] = [e, name];
    }
    console.log(
      `${c.name} bf16 model: logits ${logitsError.toExponential(2)}, loss ${
        lossError.toExponential(2)
      }, grads ${gradError.toExponential(2)} (${worst})`,
    );
    assert.ok(logitsError <= BF16_MODEL_TOLERANCE.logits, `logits ${logitsError}`);
    assert.ok(lossError <= BF16_MODEL_TOLERANCE.loss, `loss ${lossError}`);
    assert.ok(gradError <= BF16_MODEL_TOLERANCE.grads, `gradient of ${worst}: ${gradError}`);
  });
}

Deno.test("GPT.generate runs a bf16 model and a model under autocast, sampling from f32 logits", () => {
  const c = loadCases<AutocastCase>("autocast_gpt.json")[0];
  const idx = fromFixture(c.idx).narrow(1, 0, 2).contiguous();
  const greedy = (m: nn.GPT) => Array.from(m.generate(idx, 6, { topK: 1 }).toArray());
  const reference = greedy(fromNanoGPT(c));
  const half = greedy(fromNanoGPT(c).bfloat16());
  const mixed = autocast({ deviceType: "cpu", dtype: "bf16" }, () => greedy(fromNanoGPT(c)));
  // Greedy decoding of this small model picks the same tokens in f32, bf16 and autocast.
  assert.deepEqual(half, reference);
  assert.deepEqual(mixed, reference);
});
