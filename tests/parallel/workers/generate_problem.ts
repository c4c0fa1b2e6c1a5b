/**
 * The sampling generate_test.ts runs on 2 ranks and in one process: 20 tokens after a 2-row
 * prompt of 3, past the tp_problem GPT's block of 16 (so both the cached steps and the cropped
 * full forwards run), temperature 0.8, top 10.
 * @module
 */

import type { GPT } from "../../../src/nn/gpt.ts";
import { tensor } from "../../../src/tensor/creation.ts";
import { noGrad } from "../../../src/tensor/grad_mode.ts";
import { buildModel } from "./tp_problem.ts";

/** The prompt's rows. */
export const PROMPT = [[5, 17, 40], [63, 0, 22]];

/**
 * tp_problem's GPT with its weights scaled up: at initialisation (std 0.02) its next-token
 * distribution is nearly uniform, and a wrong attention would still sample the same tokens.
 */
export function sharpModel(): GPT {
  const model = buildModel();
  noGrad(() => model.parameters().forEach((p) => p.mul_(SHARPEN)));
  return model;
}

/** How much sharpModel scales the weights by. */
const SHARPEN = 6;

/** `model.generate`'s tokens for `prompt`, row after row. */
export function sampleTokens(model: GPT, prompt: number[][]): number[] {
  const idx = tensor(prompt.flat(), [prompt.length, prompt[0].length], { dtype: "i32" });
  return Array.from(model.generate(idx, 20, { temperature: 0.8, topK: 10 }).toArray());
}
