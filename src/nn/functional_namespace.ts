/**
 * The `F` namespace of mod.ts. It is a TypeScript namespace rather than `export * as F` because
 * `deno doc`, and so JSR, lists only what a namespace's module declares or re-exports with
 * `export *`, and F's functions live beside internal ops (src/tensor/ops) that F must not re-export.
 * Every member is the export of src/nn/functional.ts of the same name (tests/docs_test.ts checks
 * that none is missing); its option types are also exported at the top of mod.ts, where the
 * documentation can link them.
 * @module
 */

import * as functional from "./functional.ts";

/**
 * `F`: the functional forms of the layers (PyTorch's `torch.nn.functional`).
 */
// deno-lint-ignore no-namespace
export namespace F {
  export import gelu = functional.gelu;
  export import relu = functional.relu;
  export import silu = functional.silu;
  export import softmax = functional.softmax;
  export import logSoftmax = functional.logSoftmax;
  export import linear = functional.linear;
  export import dropout = functional.dropout;
  export import embedding = functional.embedding;
  export import layerNorm = functional.layerNorm;
  export import rmsNorm = functional.rmsNorm;
  export import crossEntropy = functional.crossEntropy;
  export import binaryCrossEntropyWithLogits = functional.binaryCrossEntropyWithLogits;
  export import mseLoss = functional.mseLoss;
  export import scaledDotProductAttention = functional.scaledDotProductAttention;
  /** Options of {@linkcode scaledDotProductAttention} (exported at the top of mod.ts too). */
  export type AttentionOptions = functional.AttentionOptions;
  /** How a loss combines its per-element values (exported at the top of mod.ts too). */
  export type Reduction = functional.Reduction;
  /** Options of {@linkcode crossEntropy} (exported at the top of mod.ts too). */
  export type CrossEntropyOptions = functional.CrossEntropyOptions;
  /** Options of {@linkcode binaryCrossEntropyWithLogits} (exported at the top of mod.ts too). */
  export type BCEWithLogitsOptions = functional.BCEWithLogitsOptions;
  /** Options of {@linkcode mseLoss} (exported at the top of mod.ts too). */
  export type MSELossOptions = functional.MSELossOptions;
}
