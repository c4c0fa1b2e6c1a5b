// nn.GPT on each accelerator (emu everywhere, cuda where a GPU is) against the same model on cpu:
// a forward and backward give the same loss and gradients, and generate() samples the
// same tokens under the same seed. The positions and the generated context are made on the
// model's device (a GPT on a device once built them on cpu, and its forward threw).
import assert from "node:assert/strict";
import { manualSeed, nn, type Tensor, tensor } from "../../mod.ts";
import { deviceTest } from "../_harness/devices.ts";
import { maxRelativeError } from "../_harness/close.ts";

const CONFIG = { vocabSize: 23, blockSize: 8, nLayer: 2, nHead: 2, nEmbd: 16, dropout: 0.1 };

/** The same GPT (seeded) on `device`. */
function gptOn(device: string): nn.GPT {
  manualSeed(12);
  return new nn.GPT(CONFIG).to(device);
}

/** Tokens [2, 8] and next-token targets, on `device`. */
function batch(device: string): [Tensor, Tensor] {
  const ids = Array.from({ length: 18 }, (_, i) => (i * 7 + 3) % CONFIG.vocabSize);
  return [
    tensor(ids.filter((_, i) => i % 9 !== 8), [2, 8], { dtype: "i32", device }),
    tensor(ids.filter((_, i) => i % 9 !== 0), [2, 8], { dtype: "i32", device }),
  ];
}

/** A forward and backward (dropout on, seeded): the loss and every parameter's gradient. */
function gradients(device: string): { loss: number; grads: Float32Array[] } {
  const model = gptOn(device);
  const [x, y] = batch(device);
  manualSeed(13);
  const { loss } = model.forward(x, y);
  loss.backward();
  return {
    loss: loss.item(),
    grads: model.parameters().map((p) => p.grad!.toArray() as Float32Array),
  };
}

// Gradients, not weights after an optimizer step: AdamW's first step is lr * g / (|g| + eps), which
// turns a gradient near zero that two devices sum in different orders into a difference of up to
// lr, whatever the kernels' accuracy (its kernel is held to the cpu's in
// tests/tensor/ops_cuda_test.ts).
deviceTest(
  "GPT forward and backward match cpu (loss and every gradient, rel err <= 1e-5)",
  (device) => {
    const cpu = gradients("cpu"), onDevice = gradients(device);
    assert.ok(Math.abs(onDevice.loss - cpu.loss) <= 1e-5 * Math.abs(cpu.loss), `${onDevice.loss}`);
    cpu.grads.forEach((g, i) => {
      const err = maxRelativeError(onDevice.grads[i], g);
      assert.ok(err <= 1e-5, `parameter ${i}: rel err ${err}`);
    });
  },
);

deviceTest("GPT generate samples the cpu's tokens under the same seed", (device) => {
  const sampled = ["cpu", device].map((on) => {
    const model = gptOn(on).eval();
    manualSeed(14);
    const out = model.generate(batch(on)[0].narrow(1, 0, 3), 9, { temperature: 0.8, topK: 5 });
    assert.equal(out.device, on);
    return [...out.toArray()];
  });
  assert.equal(sampled[0].length, 2 * 12);
  assert.deepEqual(sampled[1], sampled[0]);
});
