/**
 * model.safetensors (src/train/model_file.ts): the tied embedding stored once, as Hugging Face's
 * save_pretrained stores GPT-2, read back to the same logits, and PyTorch's file of a nanoGPT
 * GPT read to nanoGPT's logits (tests/fixtures/gen_model_file.py).
 * @module
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { readHeader } from "../../src/safetensors/safetensors.ts";
import { noGrad } from "../../src/tensor/autograd.ts";
import { tensor } from "../../src/tensor/creation.ts";
import { manualSeed } from "../../src/tensor/random.ts";
import type { Tensor } from "../../src/tensor/tensor.ts";
import { GPT } from "../../src/nn/gpt.ts";
import { loadModelFile, saveModelFile, withoutTiedHead } from "../../src/train/model_file.ts";
import { assertClose } from "../_harness/fixtures.ts";

/** Runs `fn` with a new temporary folder, removed afterwards. */
function inTempDir(fn: (dir: string) => void): void {
  const dir = Deno.makeTempDirSync({ prefix: "dtrain_model_file_" });
  try {
    fn(dir);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
}

const FIXTURE = fileURLToPath(new URL("../fixtures/model_file/", import.meta.url));

/** Every position's logits of `model` for `tokens` [B, T]. */
function logits(model: GPT, tokens: number[][]): Float32Array {
  model.eval();
  const shape = [tokens.length, tokens[0].length];
  const idx = tensor(tokens.flat(), shape, { dtype: "i32" });
  const targets = tensor(new Array(idx.numel()).fill(0), shape, { dtype: "i32" });
  return noGrad(() => model.forward(idx, targets).logits.toArray() as Float32Array);
}

Deno.test("model.safetensors stores a GPT's tied embedding once (4 bytes a parameter) and loads back to bit-identical logits", () => {
  inTempDir((dir) => {
    manualSeed(5);
    const config = { vocabSize: 300, blockSize: 8, nLayer: 2, nHead: 2, nEmbd: 32, bias: true };
    const gpt = new GPT(config);
    const path = join(dir, "model.safetensors");
    saveModelFile(path, gpt.stateDict(), gpt.config, { dataDir: dir });
    const { tensors, metadata } = readHeader(path);
    assert.equal(tensors["lm_head.weight"], undefined);
    assert.deepEqual(tensors["transformer.wte.weight"].shape, [300, 32]);
    assert.equal(metadata["lm_head.weight"], "transformer.wte.weight");
    // The tied 300 × 32 counted twice would add 38 400 bytes.
    const data = 4 * gpt.numParams(false), size = Deno.statSync(path).size;
    assert.ok(size > data && size < data + 8192, `${size} bytes for ${data} bytes of parameters`);
    const tokens = [[1, 299, 3, 7], [0, 0, 150, 42]];
    const back = loadModelFile(path);
    assert.equal(back.dataDir, dir);
    assert.equal(back.bytes, false);
    assert.ok(back.model.lm_head.weight === back.model.transformer.wte.weight, "tied again");
    assert.deepEqual(logits(back.model, tokens), logits(gpt, tokens));
  });
});

Deno.test("withoutTiedHead keeps lm_head.weight when it differs from transformer.wte.weight", () => {
  const wte = tensor([1, 2, 3, 4], [2, 2]), head = tensor([1, 2, 3, 5], [2, 2]);
  const untied: Record<string, Tensor> = { "transformer.wte.weight": wte, "lm_head.weight": head };
  assert.equal(withoutTiedHead(untied), untied);
  const copy = tensor([1, 2, 3, 4], [2, 2]);
  const tied = withoutTiedHead({ "transformer.wte.weight": wte, "lm_head.weight": copy });
  assert.deepEqual(Object.keys(tied), ["transformer.wte.weight"]);
});

Deno.test("loadModelFile reads PyTorch's save_file of nanoGPT's GPT, head dropped, to nanoGPT's logits", () => {
  const expected = JSON.parse(Deno.readTextFileSync(join(FIXTURE, "expected.json")));
  const { model, dataDir } = loadModelFile(join(FIXTURE, "model.safetensors"));
  assert.equal(dataDir, null);
  assert.deepEqual(model.config, {
    nLayer: 2,
    nHead: 2,
    nEmbd: 12,
    blockSize: 8,
    vocabSize: 23,
    bias: true,
    dropout: 0,
  });
  assertClose(logits(model, expected.tokens), expected.logits, "logits", { atol: 1e-5 });
});

Deno.test("loadModelFile refuses a file without model_args, naming it", () => {
  inTempDir((dir) => {
    const path = join(dir, "model.safetensors");
    saveModelFile(path, { "0.weight": tensor([1, 2], [1, 2]) });
    assert.throws(() => loadModelFile(path), new RegExp(`${path}: has no model_args`));
  });
});
