// nn.GPT's nanoGPT API beyond the modules (gpt_test.ts): forward(idx, targets) giving
// { logits, loss }, configureOptimizers, estimateMfu, cropBlockSize, and fromPretrained on a
// Hugging Face GPT-2 folder (tests/fixtures/gpt2_hf, made by gen_gpt2_hf.py with nanoGPT's
// model.py and from_pretrained's mapping), against nanoGPT's logits and loss.
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { join } from "node:path";
import { checkpoint, F, manualSeed, nn, optim, type Tensor, tensor } from "../../mod.ts";
import { assertClose, type FixtureTensor, fromFixture } from "../_harness/fixtures.ts";

const HF_DIR = fileURLToPath(new URL("../fixtures/gpt2_hf", import.meta.url));
const SMALL = { vocabSize: 16, blockSize: 8, nLayer: 2, nHead: 2, nEmbd: 8 };

interface Expected {
  idx: FixtureTensor;
  targets: FixtureTensor;
  logits: FixtureTensor;
  loss: number;
  lastLogits: FixtureTensor;
}
const EXPECTED: Expected = JSON.parse(Deno.readTextFileSync(join(HF_DIR, "expected.json")));

function tokens(data: number[], shape: number[]): Tensor {
  return tensor(data, shape, { dtype: "i32" });
}

/** Tokens [2, 5] and next tokens, from a fixed pattern. */
function batch(v: number): [Tensor, Tensor] {
  const idx = Array.from({ length: 10 }, (_, i) => (i * 7 + 3) % v);
  const next = Array.from({ length: 10 }, (_, i) => (i * 5 + 1) % v);
  return [tokens(idx, [2, 5]), tokens(next, [2, 5])];
}

Deno.test("GPT.forward with targets gives logits [B, T, V] and their cross-entropy; without, the last position's logits [B, 1, V] and a null loss", () => {
  manualSeed(3);
  const model = new nn.GPT(SMALL);
  const [idx, targets] = batch(16);
  const { logits, loss } = model.forward(idx, targets);
  assert.deepStrictEqual(logits.shape, [2, 5, 16]);
  const reference = F.crossEntropy(logits.reshape([-1, 16]), targets.reshape([-1]));
  assertClose([loss.item()], [reference.item()], "loss");
  const last = model.forward(idx);
  assert.equal(last.loss, null);
  assert.deepStrictEqual(last.logits.shape, [2, 1, 16]);
  assertClose(last.logits, logits.narrow(1, 4, 1).contiguous().toArray(), "last logits");
  loss.backward();
  assert.ok(model.transformer.wpe.weight.grad, "the loss reaches the parameters");
});

Deno.test("GPT.forward leaves targets of -1 out of the loss and its mean (ignoreIndex -1)", () => {
  manualSeed(4);
  const model = new nn.GPT(SMALL);
  const [idx, targets] = batch(16);
  const kept = Array.from(targets.toArray());
  const masked = kept.map((t, i) => (i === 1 || i === 7 ? -1 : t));
  const { logits, loss } = model.forward(idx, tokens(masked, [2, 5]));
  const rows = logits.reshape([10, 16]);
  const keep = [0, 2, 3, 4, 5, 6, 8, 9];
  const perRow = F.crossEntropy(rows, targets.reshape([-1]), { reduction: "none" }).toArray();
  const mean = keep.reduce((s, i) => s + perRow[i], 0) / keep.length;
  assertClose([loss.item()], [mean], "loss over the 8 scored positions");
  assert.throws(() => model.forward(idx, tokens(kept.slice(0, 5), [1, 5])), /targets \[2,5\]/);
  assert.throws(() => model.forward(idx, targets.to("f32")), /expected i32 targets/);
});

Deno.test("GPT.configureOptimizers makes nanoGPT's two AdamW groups: tensors of 2+ dimensions decayed, the rest not", () => {
  const model = new nn.GPT(SMALL);
  const lines: string[] = [];
  const opt = model.configureOptimizers(0.1, 6e-4, [0.9, 0.95], (line) => lines.push(line));
  assert.ok(opt instanceof optim.AdamW);
  // wte 16·8 + wpe 8·8, and per block c_attn 8·24, attn.c_proj 8·8, c_fc 8·32, mlp.c_proj 32·8;
  // per block 8 vectors (2 norms' weight and bias, 4 biases: 104 numbers), plus ln_f's 2.
  assert.deepStrictEqual(lines, [
    "num decayed parameter tensors: 10, with 1,728 parameters",
    "num non-decayed parameter tensors: 18, with 224 parameters",
  ]);
  const [decay, noDecay] = opt.paramGroups;
  assert.equal(opt.paramGroups.length, 2);
  assert.deepStrictEqual([decay.weightDecay, noDecay.weightDecay], [0.1, 0]);
  for (const g of opt.paramGroups) {
    assert.equal(g.lr, 6e-4);
    assert.deepStrictEqual(g.betas, [0.9, 0.95]);
  }
  assert.ok(decay.params.every((p) => p.ndim >= 2) && noDecay.params.every((p) => p.ndim === 1));
  assert.ok(decay.params.includes(model.lm_head.weight), "the tied embedding, once");
  assert.equal(decay.params.length + noDecay.params.length, model.parameters().length);

  const frozen = new nn.GPT({ ...SMALL, bias: false });
  frozen.transformer.wpe.weight.requiresGrad_(false);
  const [d, n] = frozen.configureOptimizers(0, 1e-3, [0.9, 0.999]).paramGroups;
  assert.deepStrictEqual([d.params.length, n.params.length], [9, 5], "wpe left out; 5 norms");
});

Deno.test("GPT.estimateMfu is nanoGPT's estimate_mfu: (6N + 12·L·H·Q·T)·T flops per sequence over 312 TFLOPS", () => {
  const model = new nn.GPT(SMALL);
  // 1952 parameters (1728 + 224) less wpe's 64.
  assert.equal(model.numParams(), 1888);
  const flopsPerToken = 6 * 1888 + 12 * 2 * 2 * 4 * 8; // 12864
  const expected = (flopsPerToken * 8 * 12) / 0.5 / 312e12;
  assert.equal(model.estimateMfu(12, 0.5), expected);
  assert.ok(Math.abs(model.estimateMfu(12, 0.5) - 7.916307692307692e-9) < 1e-21);
  assert.equal(model.estimateMfu(24, 0.5), 2 * expected);
});

Deno.test("GPT.cropBlockSize keeps the first position embeddings: the same logits at the new size, a clear error beyond it", () => {
  manualSeed(5);
  const model = new nn.GPT(SMALL);
  const idx = tokens([1, 5, 9, 2, 7, 3, 3, 0], [2, 4]);
  const before = model.forward(idx, idx).logits.toArray();
  const wpe = model.transformer.wpe.weight.toArray();
  model.cropBlockSize(4);
  assert.equal(model.config.blockSize, 4);
  assert.deepStrictEqual({ ...model.config, blockSize: 8 }, { ...SMALL, dropout: 0, bias: true });
  assert.deepStrictEqual(model.transformer.wpe.weight.shape, [4, 8]);
  assert.deepStrictEqual(model.transformer.wpe.weight.toArray(), wpe.subarray(0, 32));
  assert.deepStrictEqual(model.stateDict()["transformer.wpe.weight"].shape, [4, 8]);
  assert.deepStrictEqual(model.forward(idx, idx).logits.toArray(), before);
  const { loss } = model.forward(idx, idx);
  loss.backward();
  assert.deepStrictEqual(model.transformer.wpe.weight.grad?.shape, [4, 8]);
  const five = tokens([1, 2, 3, 4, 5], [1, 5]);
  assert.throws(() => model.forward(five), /length 5, block size is only 4/);
  assert.throws(() => model.cropBlockSize(5), /integer in \[1, 4\], got 5/);
  assert.throws(() => model.cropBlockSize(0), /got 0/);
  assert.throws(() => {
    (model.config as { blockSize: number }).blockSize = 2;
  }, TypeError);
  assert.throws(() => {
    (model as unknown as { config: unknown }).config = { ...model.config };
  }, TypeError);
});

Deno.test("GPT.fromPretrained loads a Hugging Face GPT-2 folder to nanoGPT's logits and loss (1e-5)", () => {
  const model = pretrained();
  assert.deepStrictEqual(model.config, {
    vocabSize: 101,
    blockSize: 16,
    nLayer: 2,
    nHead: 2,
    nEmbd: 32,
    dropout: 0,
    bias: true,
  });
  assert.equal(model.lm_head.weight, model.transformer.wte.weight, "lm_head tied to wte");
  const idx = fromFixture(EXPECTED.idx), targets = fromFixture(EXPECTED.targets);
  const { logits, loss } = model.forward(idx, targets);
  const tolerance = { rtol: 1e-5, atol: 1e-5 };
  assertClose(logits, EXPECTED.logits, "logits", tolerance);
  assertClose([loss.item()], [EXPECTED.loss], "loss", tolerance);
  assertClose(model.forward(idx).logits, EXPECTED.lastLogits, "last logits", tolerance);
  assert.equal(nn.GPT.fromPretrained(HF_DIR, { dropout: 0.1 }).config.dropout, 0.1);
});

/** The fixture's model, in evaluation mode (nanoGPT's logits were taken so). */
function pretrained(): nn.GPT {
  return nn.GPT.fromPretrained(HF_DIR).eval();
}

/**
 * A copy of the fixture folder whose tensors `edit` changes (names as in the file); `config`
 * replaces config.json's fields.
 */
function variant(
  edit: (tensors: Record<string, Tensor>) => Record<string, Tensor>,
  config: Record<string, unknown> = {},
): string {
  const dir = Deno.makeTempDirSync({ prefix: "gpt2_hf_" });
  const base = JSON.parse(Deno.readTextFileSync(join(HF_DIR, "config.json")));
  Deno.writeTextFileSync(join(dir, "config.json"), JSON.stringify({ ...base, ...config }));
  const { tensors } = checkpoint.load(join(HF_DIR, "model.safetensors"));
  checkpoint.save(join(dir, "model.safetensors"), edit(tensors), { format: "pt" });
  return dir;
}

Deno.test("GPT.fromPretrained reads names under transformer. and a stored lm_head.weight alike", () => {
  const dir = variant((t) => {
    const named = Object.entries(t).map(([k, v]) => [`transformer.${k}`, v]);
    return { ...Object.fromEntries(named), "lm_head.weight": t["wte.weight"] };
  });
  try {
    const idx = fromFixture(EXPECTED.idx);
    assertClose(nn.GPT.fromPretrained(dir).forward(idx).logits, EXPECTED.lastLogits, "logits", {
      rtol: 1e-5,
      atol: 1e-5,
    });
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("GPT.fromPretrained refuses, naming the file and key: missing files, bad config, missing, unexpected, misshapen or integer tensors, overrides other than dropout", () => {
  const missing = Deno.makeTempDirSync();
  const dirs = [missing];
  const refuses = (dir: string, pattern: RegExp) => {
    dirs.push(dir);
    assert.throws(() => nn.GPT.fromPretrained(dir), pattern);
  };
  try {
    assert.throws(() => nn.GPT.fromPretrained(missing), /config\.json: not found/);
    Deno.copyFileSync(join(HF_DIR, "config.json"), join(missing, "config.json"));
    assert.throws(() => nn.GPT.fromPretrained(missing), /model\.safetensors: not found/);
    assert.throws(
      () => nn.GPT.fromPretrained(HF_DIR, { nLayer: 1 } as never),
      /only dropout can be overridden \(as in nanoGPT\), got "nLayer"/,
    );
    refuses(variant((t) => t, { n_head: undefined }), /config\.json: n_head is undefined/);
    refuses(variant((t) => t, { n_head: 3 }), /n_embd 32 is not divisible by n_head 3/);
    refuses(variant((t) => t, { tie_word_embeddings: false }), /ties lm_head to wte/);
    refuses(
      variant((t) => {
        delete t["h.1.mlp.c_fc.bias"];
        return t;
      }),
      /model\.safetensors: missing 1 of 28 tensors: h\.1\.mlp\.c_fc\.bias/,
    );
    refuses(
      variant((t) => ({ ...t, "h.1.ln_3.weight": t["ln_f.weight"] })),
      /tensor "h\.1\.ln_3\.weight" has no counterpart transformer\.h\.1\.ln_3\.weight/,
    );
    refuses(
      variant((t) => ({ ...t, "h.0.attn.c_attn.weight": t["h.0.attn.c_attn.weight"].t() })),
      /tensor "h\.0\.attn\.c_attn\.weight" has shape \[96, 32\], expected \[32, 96\] \(Conv1D/,
    );
    refuses(
      variant((t) => ({ ...t, "wpe.weight": t["wpe.weight"].narrow(0, 0, 8) })),
      /config\.json: n_positions is 16, but model\.safetensors has wpe\.weight \[8, 32\]/,
    );
    // BF16 and F16 files load, converted (tests/checkpoint/half_test.ts); integers do not.
    const i32 = variant((t) => ({ ...t, "wte.weight": tensor([1, 2], [2], { dtype: "i32" }) }));
    refuses(i32, /model\.safetensors: tensor "wte\.weight" is I32, expected F32, BF16 or F16/);
  } finally {
    for (const dir of dirs) Deno.removeSync(dir, { recursive: true });
  }
});
