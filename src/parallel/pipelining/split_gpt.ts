/**
 * Splitting an `nn.GPT` into pipeline stages by layer index, torchtitan's way: each stage is the
 * model with the other stages' layers removed, under the whole model's parameter names, so that
 * its state dict is a slice of the whole one and checkpoints line up.
 *
 * [Note: the tied embedding across stages]
 * nanoGPT ties `lm_head.weight` to `transformer.wte.weight`; the first stage holds the embedding
 * and the last the head. dtrain keeps the tie rather than untying it (which would train a
 * different model from the one being split): each of the two stages holds the tensor, and after
 * every step the pipeline schedule sums their two gradients (Megatron's embedding group), so that
 * both copies take the same optimizer step and stay equal. In one process holding both stages
 * they are one Parameter and autograd sums the two uses itself.
 * @module
 */

import { arange } from "../../tensor/creation.ts";
import type { Tensor } from "../../tensor/tensor.ts";
import { ModuleDict } from "../../nn/container.ts";
import type { Block, GPT } from "../../nn/gpt.ts";
import { Module } from "../../nn/module.ts";
import type { Parameter } from "../../nn/parameter.ts";
import { tieAcrossStages } from "./tied.ts";

/** Options of {@linkcode splitGPT}. */
export interface SplitGPTOptions {
  /**
   * How many blocks each stage holds, in stage order, adding up to `nLayer` (default: as even as
   * possible, the first stages taking one more when it does not divide).
   */
  layersPerStage?: number[];
}

/**
 * One pipeline stage of a GPT: the first holds `transformer.wte`, `transformer.wpe` and
 * `transformer.drop`, every stage its blocks (`transformer.h.<i>` with the whole model's `i`), the
 * last `transformer.ln_f` and `lm_head`. `forward` maps the first stage's i32 tokens [B, T], or
 * the previous stage's activations [B, T, nEmbd], to activations, or on the last stage to the
 * logits [B, T, vocabSize].
 */
export class GPTStageModule extends Module {
  /** The embeddings, blocks and final norm this stage holds, by nanoGPT's names. */
  transformer: ModuleDict;
  /** The output head, on the last stage only. */
  lm_head?: Module;
  /** The whole model's configuration (what `parallelizeGPT` checks the TP size against). */
  readonly config: GPT["config"];
  #stage: { index: number; count: number; blocks: Block[] };

  /**
   * Takes (shares, does not copy) the layers of `model` that stage `stageIndex` holds.
   *
   * @param model The whole model.
   * @param stageIndex This stage.
   * @param numStages The stages of the pipeline.
   * @param blocks The indices of the blocks this stage holds.
   */
  constructor(model: GPT, stageIndex: number, numStages: number, blocks: number[]) {
    super();
    const tr = model.transformer, first = stageIndex === 0, last = stageIndex === numStages - 1;
    const held = new ModuleDict();
    if (first) held.set("wte", tr.wte).set("wpe", tr.wpe).set("drop", tr.drop);
    const h = new ModuleDict<Block>(blocks.map((i): [string, Block] => [String(i), tr.h[i]]));
    held.set("h", h);
    if (last) held.set("ln_f", tr.ln_f);
    this.transformer = held;
    if (last) this.lm_head = model.lm_head;
    this.config = model.config;
    this.#stage = { index: stageIndex, count: numStages, blocks: blocks.map((i) => tr.h[i]) };
  }

  /** Activations [B, T, nEmbd] (or tokens on the first stage) through this stage's layers. */
  forward(x: Tensor): Tensor {
    const { index, count, blocks } = this.#stage, tr = this.transformer;
    if (index === 0) {
      if (x.dtype !== "i32" || x.ndim !== 2) {
        throw new TypeError(
          `GPT stage 0: expected i32 tokens [B, T], got ${x.dtype} [${x.shape}]`,
        );
      }
      const wte = tr.get("wte"), wpe = tr.get("wpe") as Module & { weight: Parameter };
      const pos = arange(0, x.shape[1], 1, { dtype: "i32", device: wpe.weight.device });
      x = tr.get("drop").forward(wte.forward(x).add(wpe.forward(pos)));
    } else if (x.ndim !== 3) {
      throw new TypeError(
        `GPT stage ${index}: expected activations [B, T, nEmbd], got [${x.shape}]`,
      );
    }
    for (const block of blocks) x = block.forward(x);
    if (index === count - 1) x = this.lm_head!.forward(tr.get("ln_f").forward(x));
    return x;
  }
}

/** The number of blocks each stage holds when `nLayer` blocks go to `numStages` stages. */
function evenSplit(nLayer: number, numStages: number): number[] {
  const base = Math.floor(nLayer / numStages), extra = nLayer % numStages;
  return Array.from({ length: numStages }, (_, s) => base + (s < extra ? 1 : 0));
}

/**
 * Stage `stageIndex` of `model` cut into `numStages` pipeline stages by layer index (torchtitan's
 * `pipeline_module_split` for nanoGPT's layout): a {@linkcode GPTStageModule} sharing the model's
 * layers. Every rank builds the whole model from the same seed and keeps its stages; the layers
 * it does not keep are freed with the model, so drop every reference to `model` once the stages
 * are made (one kept reference holds every stage's weights on every rank). The tied `wte`/`lm_head` weight stays tied across
 * the first and last stage (see [Note: the tied embedding across stages]).
 *
 * @param model The whole GPT.
 * @param stageIndex The stage to take, in [0, numStages).
 * @param numStages The number of stages.
 * @param options See {@linkcode SplitGPTOptions}.
 * @returns The stage's module.
 * @throws RangeError for a stage index out of range, more stages than blocks (without
 *   `layersPerStage`), or `layersPerStage` of the wrong length or sum, or leaving a middle stage
 *   with no layer.
 *
 * @example Two stages of a tiny GPT
 * ```ts
 * import assert from "node:assert/strict";
 * import { nn, parallel } from "../../../mod.ts";
 * const gpt = new nn.GPT({ vocabSize: 16, blockSize: 8, nLayer: 4, nHead: 2, nEmbd: 8 });
 * const last = parallel.splitGPT(gpt, 1, 2);
 * const names = Object.keys(last.stateDict());
 * assert.ok(names.includes("transformer.h.2.attn.c_attn.weight"));
 * assert.ok(names.includes("lm_head.weight") && !names.includes("transformer.wte.weight"));
 * ```
 */
export function splitGPT(
  model: GPT,
  stageIndex: number,
  numStages: number,
  options: SplitGPTOptions = {},
): GPTStageModule {
  const nLayer = model.config.nLayer;
  if (!Number.isInteger(numStages) || numStages < 1) {
    throw new RangeError(`splitGPT: numStages must be a positive integer, got ${numStages}`);
  }
  if (!Number.isInteger(stageIndex) || stageIndex < 0 || stageIndex >= numStages) {
    throw new RangeError(
      `splitGPT: stageIndex must be an integer in [0, ${numStages}), got ${stageIndex}`,
    );
  }
  if (options.layersPerStage === undefined && numStages > nLayer) {
    throw new RangeError(
      `splitGPT: ${numStages} stages for ${nLayer} blocks; give layersPerStage to leave ` +
        `the first or last stage without blocks`,
    );
  }
  const counts = options.layersPerStage ?? evenSplit(nLayer, numStages);
  const sum = counts.reduce((a, b) => a + b, 0);
  if (
    counts.length !== numStages || counts.some((c) => !Number.isInteger(c) || c < 0) ||
    sum !== nLayer
  ) {
    throw new RangeError(
      `splitGPT: layersPerStage must be ${numStages} non-negative integers adding up to ` +
        `nLayer ${nLayer}, got [${counts.join(", ")}]`,
    );
  }
  const empty = counts.findIndex((c, s) => c === 0 && s > 0 && s < numStages - 1);
  if (empty !== -1) {
    throw new RangeError(`splitGPT: layersPerStage leaves stage ${empty} with no layer`);
  }
  const start = counts.slice(0, stageIndex).reduce((a, b) => a + b, 0);
  const blocks = Array.from({ length: counts[stageIndex] }, (_, i) => start + i);
  const stage = new GPTStageModule(model, stageIndex, numStages, blocks);
  const tied = model.lm_head.weight === model.transformer.wte.weight;
  if (tied && numStages > 1 && (stageIndex === 0 || stageIndex === numStages - 1)) {
    const name = stageIndex === 0 ? "transformer.wte.weight" : "lm_head.weight";
    tieAcrossStages(stage, name, [0, numStages - 1]);
  }
  return stage;
}
