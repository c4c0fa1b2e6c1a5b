/**
 * Helpers shared by the tests that compare with PyTorch: reading the fixtures in tests/fixtures,
 * turning their tensors and optimizers into dtrain's, and comparing arrays within a relative +
 * absolute tolerance.
 * @module
 */

import { AssertionError } from "node:assert/strict";
import { type DType, nn, optim, type Tensor, tensor } from "../../mod.ts";
import { sameShape } from "../../src/tensor/layout.ts";

/** A tensor as the fixtures store it: flat row-major data. */
export interface FixtureTensor {
  shape: number[];
  dtype: DType;
  data: number[];
}

/** One case of ops.json or nn.json. */
export interface OpCase {
  name: string;
  op: string;
  args: Record<string, unknown>;
  inputs: Record<string, FixtureTensor>;
  gradOutput: FixtureTensor;
  outputs: { out: FixtureTensor };
  grads: Record<string, FixtureTensor>;
}

/**
 * The `cases` of a fixture file.
 *
 * @param file A file name in tests/fixtures, such as `ops.json`.
 */
export function loadCases<C = OpCase>(file: string): C[] {
  const url = new URL(`../fixtures/${file}`, import.meta.url);
  return JSON.parse(Deno.readTextFileSync(url)).cases as C[];
}

/** A new dtrain tensor holding a fixture tensor's values (bit-exact for f32). */
export function fromFixture(t: FixtureTensor, requiresGrad = false): Tensor {
  const data = t.dtype === "f32" ? Float32Array.from(t.data) : Int32Array.from(t.data);
  return tensor(data, t.shape, { dtype: t.dtype, requiresGrad });
}

/**
 * The optimizer a fixture names, over `params`.
 *
 * @param op "SGD" or "AdamW", as the fixture's `op`.
 * @param params The parameters to train.
 * @param args The fixture's `args` (PyTorch's hyperparameters under dtrain's names).
 */
export function optimizerFromFixture(
  op: string,
  params: Tensor[],
  args: Record<string, unknown>,
): optim.SGD | optim.AdamW {
  if (op === "SGD") return new optim.SGD(params, args as unknown as optim.SGDOptions);
  if (op === "AdamW") return new optim.AdamW(params, args as optim.AdamWOptions);
  throw new Error(`unknown optimizer "${op}" in the fixture`);
}

/**
 * nanoGPT's model from a fixture: its `GPTConfig` (snake_case, as model.py names it) and its
 * `state_dict`, loaded into an `nn.GPT` of the same shape.
 *
 * @param config The fixture's config (vocab_size, block_size, n_layer, n_head, n_embd, dropout, bias).
 * @param stateDict The fixture's tensors by nanoGPT's parameter names.
 */
export function gptFromFixture(
  config: Record<string, number | boolean>,
  stateDict: Record<string, FixtureTensor>,
): nn.GPT {
  const model = new nn.GPT({
    vocabSize: config.vocab_size as number,
    blockSize: config.block_size as number,
    nLayer: config.n_layer as number,
    nHead: config.n_head as number,
    nEmbd: config.n_embd as number,
    dropout: config.dropout as number,
    bias: config.bias as boolean,
  });
  model.loadStateDict(
    Object.fromEntries(Object.entries(stateDict).map(([name, t]) => [name, fromFixture(t)])),
  );
  return model;
}

/** Tolerances of {@linkcode assertClose}: |actual - expected| <= atol + rtol * |expected|. */
export interface Tolerance {
  rtol?: number;
  atol?: number;
}

/**
 * Fails unless every element is within tolerance, naming the worst element (the largest error
 * relative to its allowance) with both values. NaN must match NaN. A tensor's shape must match a
 * fixture tensor's.
 *
 * @param actual What dtrain computed.
 * @param expected The reference.
 * @param what Names the compared quantity in the failure message.
 * @param tolerance Defaults to 1e-5 relative and 1e-6 absolute.
 */
export function assertClose(
  actual: Tensor | ArrayLike<number>,
  expected: FixtureTensor | ArrayLike<number>,
  what: string,
  { rtol = 1e-5, atol = 1e-6 }: Tolerance = {},
): void {
  let got: ArrayLike<number>;
  if ("toArray" in actual) {
    if ("shape" in expected && !sameShape(actual.shape, expected.shape)) {
      throw new AssertionError({
        message: `${what}: shape [${actual.shape}] but expected [${expected.shape}]`,
      });
    }
    got = actual.toArray();
  } else {
    got = actual;
  }
  const want = "data" in expected ? expected.data : expected;
  if (got.length !== want.length) {
    throw new AssertionError({
      message: `${what}: ${got.length} elements but expected ${want.length}`,
    });
  }
  let worst = -1, worstRatio = 1, bad = 0;
  for (let i = 0; i < want.length; i++) {
    const a = got[i], e = want[i];
    if (Number.isNaN(e) && Number.isNaN(a)) continue;
    const ratio = Math.abs(a - e) / (atol + rtol * Math.abs(e));
    if (!(ratio <= 1)) {
      bad++;
      if (!(ratio <= worstRatio)) [worst, worstRatio] = [i, ratio];
    }
  }
  if (bad > 0) {
    throw new AssertionError({
      message:
        `${what}: ${bad}/${want.length} elements out of tolerance (rtol ${rtol}, atol ${atol}); ` +
        `worst at index ${worst}: got ${got[worst]}, expected ${want[worst]} ` +
        `(error ${Math.abs(got[worst] - want[worst]).toExponential(3)})`,
    });
  }
}
