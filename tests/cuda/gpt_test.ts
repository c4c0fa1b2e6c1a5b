// nn.GPT on each accelerator (emu everywhere, cuda where a GPU is) against the same model on cpu:
// a forward, backward and AdamW step give the same loss and weights, and generate() samples the
// same tokens under the same seed. The positions and the generated context are made on the
// model's device (a GPT on a device once built them on cpu, and its forward threw).
import assert from "node:assert/strict";
import { manualSeed, nn, optim, type Tensor, tensor } from "../../mod.ts";
import { type Accelerator, deviceTest, relativeError } from "./_gpu.ts";

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

/** One training step (dropout on, seeded): the loss and every parameter after AdamW. */
function step(device: string): { loss: number; weights: Float32Array[] } {
  const model = gptOn(device);
  const opt = new optim.AdamW(model.parameters(), { lr: 1e-2, weightDecay: 0.1 });
  const [x, y] = batch(device);
  manualSeed(13);
  const { loss } = model.forward(x, y);
  loss.backward();
  opt.step();
  return {
    loss: loss.item(),
    weights: model.parameters().map((p) => p.toArray() as Float32Array),
  };
}

/**
 * How far a step may drift from the cpu's: the emulator runs the cpu's kernels (1e-5 leaves room
 * for nothing but a different summation order); a GPU sums in other orders, and AdamW's normalised
 * update magnifies that for gradients near zero.
 */
const STEP_TOLERANCE: Record<Accelerator, number> = { "emu:0": 1e-5, "cuda:0": 1e-3 };

deviceTest(
  "GPT forward, backward and an AdamW step match cpu (rel err <= 1e-5 emu, 1e-3 cuda)",
  (device) => {
    const cpu = step("cpu"), onDevice = step(device);
    const tolerance = STEP_TOLERANCE[device];
    assert.ok(
      Math.abs(onDevice.loss - cpu.loss) <= tolerance * Math.abs(cpu.loss),
      `${onDevice.loss}`,
    );
    cpu.weights.forEach((w, i) => {
      const err = relativeError(onDevice.weights[i], w);
      assert.ok(err <= tolerance, `parameter ${i}: rel err ${err}`);
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
