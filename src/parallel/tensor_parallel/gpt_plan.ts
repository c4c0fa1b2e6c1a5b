/**
 * Tensor parallelism for `nn.GPT`: the plan (after torchtitan's `apply_tp` for Llama, on
 * nanoGPT's module names) and `parallelizeGPT`, which also checks the sizes and sets the loss.
 * @module
 */

import { GPT } from "../../nn/gpt.ts";
import { setGPTLoss } from "../../nn/gpt.ts";
import type { Module } from "../../nn/module.ts";
import { GPTStageModule } from "../pipelining/split_gpt.ts";
import { vocabParallelCrossEntropy } from "./loss.ts";
import type { DeviceMesh } from "../../distributed/device_mesh.ts";
import { parallelizeModule } from "./parallelize.ts";
import { Replicate, Shard } from "./placement.ts";
import { ColwiseParallel, type ParallelStyle, RowwiseParallel } from "./style.ts";
import { PrepareModuleInput, PrepareModuleOutput, SequenceParallel } from "./style_sequence.ts";

/** Options of {@linkcode gptTensorParallelPlan} and {@linkcode parallelizeGPT}. */
export interface GPTTensorParallelOptions {
  /**
   * Keep each rank's part of the sequence between the tensor-parallel layers (the norms,
   * dropouts and residual stream): activations there take 1/tp of the memory (default false).
   * The sequence length must be divisible by the TP size.
   */
  sequenceParallel?: boolean;
  /**
   * Leave the logits split on the vocabulary ([B, T, vocabSize / tp] on each rank) and compute
   * the loss from the shards (PyTorch's `loss_parallel`); otherwise the logits are gathered
   * ([B, T, vocabSize] on every rank) and the loss is the plain cross-entropy (default false).
   */
  lossParallel?: boolean;
}

/**
 * The tensor-parallel plan of `nn.GPT` by module name, for `parallelizeModule`:
 *
 * - `transformer.wte`: RowwiseParallel on the vocabulary (input Replicate ids; output Replicate,
 *   or Shard(1) with sequence parallelism); its weight is tied to `lm_head`'s and both split it
 *   on dim 0, so they stay one tensor, its gradient summing both uses;
 * - `transformer.wpe`: replicated; with sequence parallelism a PrepareModuleOutput keeps this
 *   rank's positions (Replicate to Shard(0));
 * - each block: `attn.c_attn` ColwiseParallel({ chunks: 3 }) (each rank holds its heads' q, k and
 *   v, so nHead must be divisible by the TP size; attention runs over the local heads),
 *   `attn.c_proj` RowwiseParallel, `mlp.c_fc` ColwiseParallel, `mlp.c_proj` RowwiseParallel; with
 *   sequence parallelism the row-parallel outputs are Shard(1), `ln_1`, `ln_2` and the dropouts
 *   are SequenceParallel, and `attn` and `mlp` gather their input with PrepareModuleInput
 *   (Shard(1) to Replicate);
 * - `transformer.ln_f`: SequenceParallel with sequence parallelism (else replicated);
 * - `lm_head`: ColwiseParallel on the vocabulary (input Shard(1) with sequence parallelism);
 *   output Shard(-1) local with `lossParallel`, else Replicate (gathered).
 *
 * Dropout draws its masks on each rank's local activations, so with dropout > 0 training is not
 * bit-equal to one process (see `SequenceParallel`). Generation (`forward(idx)` without targets,
 * which runs `lm_head` on the last position only, and `generate`) needs the plan without sequence
 * parallelism and without `lossParallel` (whose logits are each rank's part of the vocabulary).
 *
 * @param options See {@linkcode GPTTensorParallelOptions}.
 * @returns The plan.
 */
export function gptTensorParallelPlan(
  options: GPTTensorParallelOptions = {},
): Record<string, ParallelStyle> {
  const sp = options.sequenceParallel ?? false, lossParallel = options.lossParallel ?? false;
  const residual = sp ? new Shard(1) : new Replicate();
  const head = new ColwiseParallel({
    inputLayouts: sp ? new Shard(1) : new Replicate(),
    outputLayouts: lossParallel ? new Shard(-1) : new Replicate(),
    useLocalOutput: !lossParallel,
  });
  const plan: Record<string, ParallelStyle> = {
    "transformer.wte": new RowwiseParallel({
      inputLayouts: new Replicate(),
      outputLayouts: residual,
    }),
    "transformer.h.*.attn.c_attn": new ColwiseParallel({ chunks: 3 }),
    "transformer.h.*.attn.c_proj": new RowwiseParallel({ outputLayouts: residual }),
    "transformer.h.*.mlp.c_fc": new ColwiseParallel(),
    "transformer.h.*.mlp.c_proj": new RowwiseParallel({ outputLayouts: residual }),
    "lm_head": head,
  };
  if (sp) {
    const gather = () =>
      new PrepareModuleInput({ inputLayouts: new Shard(1), desiredInputLayouts: new Replicate() });
    Object.assign(plan, {
      "transformer.wpe": new PrepareModuleOutput({
        outputLayouts: new Replicate(),
        desiredOutputLayouts: new Shard(0),
      }),
      "transformer.drop": new SequenceParallel(),
      "transformer.h.*.ln_1": new SequenceParallel(),
      "transformer.h.*.attn": gather(),
      "transformer.h.*.attn.resid_dropout": new SequenceParallel(),
      "transformer.h.*.ln_2": new SequenceParallel(),
      "transformer.h.*.mlp": gather(),
      "transformer.h.*.mlp.dropout": new SequenceParallel(),
      "transformer.ln_f": new SequenceParallel(),
    });
  }
  return plan;
}

/**
 * Applies {@linkcode gptTensorParallelPlan} to `model` across `tpMesh`, in place, after checking
 * that the TP size divides nHead (and so nEmbd) and vocabSize; with `lossParallel`, makes
 * `model.forward(idx, targets)` compute its loss from the vocabulary shards
 * (`vocabParallelCrossEntropy`, ignoring targets of -1 as nanoGPT does), the same value on every
 * rank as one process's. Call it before making the optimizer, as for `fullyShard`.
 *
 * A pipeline stage of the GPT (`splitGPT`'s) takes the plan's entries for the modules it holds:
 * the first stage's `wte` and `wpe`, every stage's blocks, the last's `ln_f` and `lm_head`. With
 * `lossParallel` its logits stay split on the vocabulary, so the schedule's loss function must be
 * `vocabParallelCrossEntropy` over the TP group.
 *
 * @param model The GPT, or a pipeline stage of it; every rank passes an equal one.
 * @param tpMesh The 1-D mesh of the tensor-parallel ranks.
 * @param options See {@linkcode GPTTensorParallelOptions}.
 * @returns `model`.
 * @throws RangeError naming the size the TP size does not divide.
 */
export function parallelizeGPT<M extends GPT | GPTStageModule>(
  model: M,
  tpMesh: DeviceMesh,
  options: GPTTensorParallelOptions = {},
): M {
  if (!(model instanceof GPT) && !(model instanceof GPTStageModule)) {
    throw new TypeError(
      `parallelizeGPT: expected an nn.GPT or a stage of one (splitGPT), got ${
        Object(model).constructor?.name
      }`,
    );
  }
  const group = tpMesh.getGroup(), size = group.size;
  const { nHead, vocabSize } = model.config;
  for (const [name, value] of [["nHead", nHead], ["vocabSize", vocabSize]] as const) {
    if (value % size !== 0) {
      throw new RangeError(
        `parallelizeGPT: ${name} ${value} is not divisible by the tensor-parallel size ${size}`,
      );
    }
  }
  const plan = gptTensorParallelPlan(options);
  parallelizeModule(model, tpMesh, model instanceof GPT ? plan : heldPart(plan, model));
  if (options.lossParallel && model instanceof GPT) {
    setGPTLoss(model, (logits, targets) =>
      vocabParallelCrossEntropy(
        logits.reshape([-1, logits.shape[logits.ndim - 1]]),
        targets.reshape([-1]),
        group,
        { ignoreIndex: -1 },
      ));
  }
  return model;
}

/** The entries of `plan` that name a module `stage` holds (a stage lacks the others' layers). */
function heldPart(
  plan: Record<string, ParallelStyle>,
  stage: Module,
): Record<string, ParallelStyle> {
  const names = [...stage.namedModules()].map(([name]) => name);
  const held = (pattern: string) => {
    const parts = pattern.split(".");
    return names.some((name) => {
      const got = name.split(".");
      return got.length === parts.length && parts.every((p, i) => p === "*" || p === got[i]);
    });
  };
  return Object.fromEntries(Object.entries(plan).filter(([pattern]) => held(pattern)));
}
