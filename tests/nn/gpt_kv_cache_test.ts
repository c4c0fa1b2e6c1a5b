// nn.KVCache and the cached GPT.generate: each incremental step's logits equal a full forward's
// over the same prefix (1e-5), and generate samples the tokens of nanoGPT's loop (a full forward
// over the last blockSize tokens per new token, then one rand([B]) draw), written out here, for
// prompts that fit the block, runs past it (the crop), batch 2, temperature and top k; and the
// cache's steps on each accelerator (emu, cuda) against the cpu's full forward.
import assert from "node:assert/strict";
import { allocatedBytes, manualSeed, nn, noGrad, rand, type Tensor, tensor } from "../../mod.ts";
import { maxRelativeError } from "../_harness/close.ts";
import { deviceTest } from "../_harness/devices.ts";

const CONFIG = { vocabSize: 19, blockSize: 8, nLayer: 2, nHead: 2, nEmbd: 16 };

/** A seeded tiny GPT in eval mode. */
function tinyGPT(config: nn.GPTConfig = CONFIG): nn.GPT {
  manualSeed(21);
  return new nn.GPT(config).eval();
}

/** i32 tokens [rows.length, T]. */
function tokens(rows: number[][]): Tensor {
  return tensor(rows.flat(), [rows.length, rows[0].length], { dtype: "i32" });
}

/** The logits of the last position, from a full forward over every row. */
function lastLogits(model: nn.GPT, rows: number[][]): Float32Array {
  return model.forward(tokens(rows)).logits.toArray() as Float32Array;
}

/** nanoGPT's sampling: softmax(logits / temperature) over the top k, drawn by inverse CDF at u. */
function draw(logits: ArrayLike<number>, temperature: number, topK: number, u: number): number {
  const scaled = Array.from(logits, (x) => x / temperature);
  const kth = [...scaled].sort((a, b) => b - a)[Math.min(topK, scaled.length) - 1];
  const weights = scaled.map((x) => (x < kth ? 0 : Math.exp(x - Math.max(...scaled))));
  const total = weights.reduce((a, b) => a + b, 0);
  let acc = 0;
  for (let i = 0; i < weights.length; i++) {
    acc += weights[i] / total;
    if (u < acc) return i;
  }
  return weights.findLastIndex((w) => w > 0);
}

/** nanoGPT's generate: a full forward over the last blockSize tokens for each new token. */
function fullForwardTokens(
  model: nn.GPT,
  prompt: number[][],
  maxNewTokens: number,
  temperature: number,
  topK: number,
): number[] {
  const rows = prompt.map((row) => [...row]);
  const v = model.config.vocabSize, block = model.config.blockSize;
  noGrad(() => {
    for (let step = 0; step < maxNewTokens; step++) {
      const logits = lastLogits(model, rows.map((row) => row.slice(-block)));
      const u = rand([rows.length]).toArray();
      rows.forEach((row, r) =>
        row.push(draw(logits.subarray(r * v, (r + 1) * v), temperature, topK, u[r]))
      );
    }
  });
  return rows.flat();
}

Deno.test("KVCache: each one-token step's logits equal a full forward's over the prefix (1e-5)", () => {
  const model = tinyGPT();
  const rows = [[3, 1, 4, 1, 5, 9, 2, 6], [2, 7, 1, 8, 2, 8, 1, 8]];
  using cache = new nn.KVCache(CONFIG.nLayer, CONFIG.blockSize);
  noGrad(() => {
    const prompt = rows.map((row) => row.slice(0, 3));
    const first = model.forward(tokens(prompt), null, cache).logits.toArray();
    assert.deepEqual(first, lastLogits(model, prompt), "the prompt's pass is the full forward");
    for (let t = 4; t <= CONFIG.blockSize; t++) {
      const step = model.forward(tokens(rows.map((row) => [row[t - 1]])), null, cache);
      assert.deepEqual(step.logits.shape, [2, 1, CONFIG.vocabSize]);
      const want = lastLogits(model, rows.map((row) => row.slice(0, t)));
      const err = maxRelativeError(step.logits.toArray(), want);
      assert.ok(err <= 1e-5, `length ${t}: rel err ${err}`);
      assert.equal(cache.length, t);
    }
  });
});

Deno.test("KVCache: chunks of several positions attend causally over the cached ones", () => {
  const model = tinyGPT();
  const row = [5, 3, 0, 18, 7, 7, 2, 11];
  const targets = tensor(row.map(() => 0), [1, row.length], { dtype: "i32" });
  const whole = noGrad(() => model.forward(tokens([row]), targets).logits.toArray());
  using cache = new nn.KVCache(CONFIG.nLayer, CONFIG.blockSize);
  const v = CONFIG.vocabSize;
  let at = 0;
  for (const size of [3, 2, 1, 2]) {
    const chunk = row.slice(at, at + size);
    const logits = noGrad(() =>
      model.forward(tokens([chunk]), targets.narrow(1, 0, size), cache).logits.toArray()
    );
    const err = maxRelativeError(logits, whole.subarray(at * v, (at + size) * v));
    assert.ok(err <= 1e-5, `positions ${at}..${at + size - 1}: rel err ${err}`);
    at += size;
  }
});

deviceTest(
  "KVCache on an accelerator: its steps give the cpu's full-forward logits (1e-5)",
  (device) => {
    const row = [9, 9, 1, 0, 14, 2, 6, 3];
    const targets = (n: number, on: string) =>
      tensor(new Array(n).fill(0), [1, n], { dtype: "i32", device: on });
    const whole = noGrad(() =>
      tinyGPT().forward(tokens([row]), targets(row.length, "cpu")).logits.toArray()
    );
    const model = tinyGPT().to(device);
    using cache = new nn.KVCache(CONFIG.nLayer, CONFIG.blockSize);
    const v = CONFIG.vocabSize;
    let at = 0;
    for (const size of [3, 1, 2, 1, 1]) {
      const chunk = tensor(row.slice(at, at + size), [1, size], { dtype: "i32", device });
      const logits = noGrad(() => model.forward(chunk, targets(size, device), cache).logits);
      assert.equal(logits.device, device);
      const err = maxRelativeError(logits.toArray(), whole.subarray(at * v, (at + size) * v));
      assert.ok(err <= 1e-5, `positions ${at}..${at + size - 1}: rel err ${err}`);
      at += size;
    }
  },
);

Deno.test("GPT.generate with its cache samples nanoGPT's full-forward tokens, past the block", () => {
  const model = tinyGPT();
  const cases = [
    { prompt: [[1, 2, 3], [4, 5, 6]], temperature: 0.8, topK: 5 }, // crop after 5 new tokens
    { prompt: [[7]], temperature: 1, topK: CONFIG.vocabSize }, // every token eligible
    { prompt: [[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]], temperature: 1.3, topK: 3 }, // cropped at once
  ];
  for (const { prompt, temperature, topK } of cases) {
    manualSeed(5);
    const want = fullForwardTokens(model, prompt, 14, temperature, topK);
    manualSeed(5);
    const got = model.generate(tokens(prompt), 14, { temperature, topK });
    assert.deepEqual(got.shape, [prompt.length, prompt[0].length + 14]);
    assert.deepEqual(Array.from(got.toArray()), want, `prompt ${JSON.stringify(prompt)}`);
  }
});

Deno.test("GPT.generate in training mode with dropout draws its masks as nanoGPT (no cache)", () => {
  const model = tinyGPT({ ...CONFIG, dropout: 0.2 }).train();
  manualSeed(9);
  const want = fullForwardTokens(model, [[2, 4], [6, 8]], 10, 0.9, 6);
  manualSeed(9);
  const got = model.generate(tokens([[2, 4], [6, 8]]), 10, { temperature: 0.9, topK: 6 });
  assert.deepEqual(Array.from(got.toArray()), want);
});

Deno.test("GPT.generate leaves no tensor behind but its output (the cache is freed)", () => {
  const model = tinyGPT();
  const prompt = tokens([[1, 2], [3, 4]]);
  const before = allocatedBytes();
  model.generate(prompt, 12, { topK: 4 }).dispose();
  assert.equal(allocatedBytes(), before);
});

Deno.test("KVCache refuses positions past its capacity, gradients, dropout and a wrong model", () => {
  const model = tinyGPT();
  using cache = new nn.KVCache(CONFIG.nLayer, CONFIG.blockSize);
  assert.throws(
    () => model.forward(tokens([[1, 2]]), null, cache),
    /use the cache under noGrad/,
  );
  noGrad(() => model.forward(tokens([[1, 2, 3, 4, 5, 6]]), null, cache));
  assert.throws(
    () => noGrad(() => model.forward(tokens([[1, 2, 3]]), null, cache)),
    /cannot forward 3 positions after 6 cached ones, block size is only 8/,
  );
  assert.throws(
    () => noGrad(() => model.forward(tokens([[1], [2]]), null, cache)),
    /holds f32 rows of \[B 1, 3C 48\], got f32 \[2,1,48\]/,
  );
  assert.throws(
    () => noGrad(() => model.forward(tokens([[1]]), null, new nn.KVCache(3, 8))),
    /a KVCache of 3 layers for 2 blocks/,
  );
  const dropping = tinyGPT({ ...CONFIG, dropout: 0.1 }).train();
  assert.throws(
    () => noGrad(() => dropping.forward(tokens([[1]]), null, new nn.KVCache(2, 8))),
    /needs attention dropout off \(call eval\(\)\)/,
  );
  assert.throws(() => new nn.KVCache(0, 8), /nLayer must be a positive integer, got 0/);
});
