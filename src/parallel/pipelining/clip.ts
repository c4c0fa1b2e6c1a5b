/**
 * `clipGradNormPipeline`: `clipGradNorm` over a pipeline's stages (torchtitan's `clip_grad_norm_`
 * with its `pp_mesh`): the squares of every stage's gradients summed across the pipeline's ranks
 * too, each parameter counted once.
 * @module
 */

import { clipGradNorm, type ClipGradNormOptions } from "../../nn/utils/clip_grad.ts";
import type { Parameter } from "../../nn/parameter.ts";
import { partialsGatherer } from "../_norm_partials.ts";
import type { PipelineStage } from "./stage.ts";
import { tiedParameter, tiedParameters } from "./tied.ts";

/**
 * Scales the gradients of this rank's stages so that the whole pipelined model's total
 * `normType`-norm is at most `maxNorm`, and returns that norm before clipping, the same on every
 * rank. Each stage's partial sums are combined across its FSDP and TP groups as `clipGradNorm`
 * does (see [Note: sharded gradients] in src/nn/utils/clip_grad.ts), then across the pipeline's
 * group; a parameter tied across stages (the GPT's `wte`/`lm_head`, whose copies hold the same
 * summed gradient after the step) counts on the lowest stage holding it only, and its other
 * copies are scaled alike. Every rank of the pipeline (and of its data-parallel and TP groups)
 * must call it.
 *
 * @param stages This rank's stages.
 * @param maxNorm The largest allowed total norm.
 * @param normType The p of the p-norm: 2 (default), any positive number, or `Infinity`.
 * @param options See `nn.utils.ClipGradNormOptions` (its `sumAcross` and `alsoScale` are set
 *   here).
 * @returns The total norm.
 * @throws TypeError for no stages, or what `clipGradNorm` throws.
 */
export function clipGradNormPipeline(
  stages: readonly PipelineStage[],
  maxNorm: number,
  normType = 2,
  options: Omit<ClipGradNormOptions, "sumAcross" | "alsoScale"> = {},
): number {
  if (!Array.isArray(stages) || stages.length === 0) {
    throw new TypeError("clipGradNormPipeline: expected this rank's pipeline stages (a list)");
  }
  const copies = new Set<Parameter>();
  for (const stage of stages) {
    for (const tie of tiedParameters(stage.submod)) {
      if (tie.stages[0] !== stage.stageIndex) copies.add(tiedParameter(stage.submod, tie));
    }
  }
  const all = [...new Set(stages.flatMap((s) => s.submod.parameters()))];
  const counted = all.filter((p) => !copies.has(p));
  const device = all[0]?.device ?? "cpu";
  return clipGradNorm(counted, maxNorm, normType, {
    ...options,
    sumAcross: partialsGatherer(stages[0].group, device),
    alsoScale: [...copies],
  });
}
