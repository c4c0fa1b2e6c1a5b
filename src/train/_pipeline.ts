/**
 * `--pp`: the train job's GPT as this rank's pipeline stages (torchtitan's `pipeline_llama`):
 * every rank builds the whole model from the seed, keeps the stages the `pp` dimension places on
 * it (`splitGPT`, rank r the stages r, r + pp, ... under Interleaved 1F1B), parallelized as
 * `parallelizePipelineGPT` does (TP, AC, FSDP per stage), and runs each step by the schedule over
 * the mesh's `pp` group. Under `--strategy ddp` the gradients are then averaged over the
 * data-parallel group (one all-reduce per parameter, after the schedule, in place of DDP's hooks,
 * which would fire once per microbatch).
 *
 * - The loss: each microbatch's cross-entropy summed, over the whole batch's target count, so that
 *   the microbatches' losses add up to the whole batch's mean and their gradients to its gradient
 *   (the schedule's own scaling off), whatever the microbatches' sizes. The last stage has it; it
 *   is broadcast over the pipeline so that every rank reports the whole batch's loss.
 * - The gradient norm: `clipGradNormPipeline`'s, every stage's squares summed over the pipeline,
 *   the tied `wte`/`lm_head` counted once, as one process's `clip_grad_norm_` over the model.
 * - {@linkcode PipelinedGPT.module} holds this rank's stages under the whole model's names (what
 *   the optimizer steps and the sharded snapshot saves).
 * @module
 */

import { allReduce, broadcast } from "../distributed/collectives.ts";
import { irecv, isend } from "../distributed/p2p.ts";
import type { ProcessGroup } from "../distributed/process_group.ts";
import { ModuleDict } from "../nn/container.ts";
import type { GPT } from "../nn/gpt.ts";
import { Module } from "../nn/module.ts";
import type { GPTStageModule } from "../parallel/pipelining/split_gpt.ts";
import type { PipelineStage } from "../parallel/pipelining/stage.ts";
import type { PipelineSchedule } from "../parallel/pipelining/schedule.ts";
import { parallelizePipelineGPT } from "../parallel/pipelining/parallelize_3d.ts";
import { clipGradNormPipeline } from "../parallel/pipelining/clip.ts";
import { noGrad } from "../tensor/autograd.ts";
import { tensor, zeros } from "../tensor/creation.ts";
import { crossEntropy } from "../tensor/ops/cross_entropy.ts";
import type { Tensor } from "../tensor/tensor.ts";
import type { TrainConfig } from "./_schema.ts";
import type { Layout } from "./_layout.ts";
import { microbatchesOf, stagesPerRank } from "./_pp_config.ts";
import { fsdpPolicy } from "./precision.ts";

/** Above the schedules' tags (see parallel/pipelining/_exchange.ts) and below the tied sum's. */
const EVAL_TAG = 1 << 29;

/**
 * A rank's pipeline stages as one module, under the whole GPT's names (`transformer.wte`,
 * `transformer.h.<i>`, `lm_head`, ...): the union of its stages' state dicts.
 */
export class PipelineRankModule extends Module {
  /** The embeddings, blocks and final norm this rank's stages hold. */
  transformer = new ModuleDict();
  /** The output head, on the rank of the last stage. */
  lm_head?: Module;

  /** Gathers `stages`' layers (shared, not copied). */
  constructor(stages: GPTStageModule[]) {
    super();
    const h = new ModuleDict();
    for (const stage of stages) {
      for (const [name, child] of stage.transformer.items()) {
        if (name !== "h") this.transformer.set(name, child);
        else for (const [i, block] of (child as ModuleDict).items()) h.set(i, block);
      }
      if (stage.lm_head) this.lm_head = stage.lm_head;
    }
    this.transformer.set("h", h);
  }

  /** A rank's stages run by the schedule, one at a time; this module has no forward of its own. */
  forward(): never {
    throw new Error("PipelineRankModule: the pipeline schedule runs its stages");
  }
}

/** The train job's GPT as this rank's pipeline stages and their schedule. */
export class PipelinedGPT {
  /** This rank's stages as one module (see {@linkcode PipelineRankModule}). */
  readonly module: PipelineRankModule;
  readonly #stages: PipelineStage[];
  readonly #schedule: PipelineSchedule;
  readonly #pp: ProcessGroup;
  readonly #dp: ProcessGroup | null;
  readonly #vocab: number;
  readonly #nEmbd: number;
  /** Targets in the running step's whole batch (each microbatch's loss is its share of them). */
  #targets = 1;

  /**
   * Splits `model` (the whole GPT, built alike on every rank) into the pipeline's stages, keeps
   * this rank's and parallelizes them (`parallelizePipelineGPT`: TP over the mesh's "tp", then
   * `--ac`, then under `--strategy fsdp` FSDP over its dp dimensions).
   */
  constructor(config: TrainConfig, model: GPT, layout: Layout) {
    const mesh = layout.mesh!, fsdp = config.strategy === "fsdp", tp = config.tp > 1;
    // FSDP shards each stage over the dp dimensions; DDP's replicas are averaged in step().
    const made = parallelizePipelineGPT(model, fsdp ? mesh : mesh.get(tp ? ["pp", "tp"] : "pp"), {
      schedule: config.ppSchedule,
      nMicrobatches: microbatchesOf(config),
      lossFn: (y, t) => this.#loss(y, t),
      scaleGrads: false,
      stagesPerRank: stagesPerRank(config),
      // Whole activations between stages and whole logits for the loss (_pp_config.ts).
      tp: { sequenceParallel: false, lossParallel: false },
      ac: config.ac === "none"
        ? undefined
        : config.ac === "full"
        ? { mode: "full" }
        : { mode: "selective", every: config.acEvery },
      fsdp: { mpPolicy: fsdpPolicy(config) },
    });
    this.#stages = made.stages;
    this.#schedule = made.schedule;
    this.module = new PipelineRankModule(made.modules);
    this.#pp = layout.ppGroup!;
    this.#dp = !fsdp && layout.dpSize > 1 ? layout.dpGroup : null;
    this.#vocab = model.config.vocabSize;
    this.#nEmbd = model.config.nEmbd;
  }

  /** A microbatch's share of the whole batch's mean cross-entropy (nanoGPT's, ignoring -1). */
  #loss(logits: Tensor, targets: Tensor): Tensor {
    const flat = logits.reshape([-1, this.#vocab]), t = targets.reshape([-1]);
    return crossEntropy(flat, t, { ignoreIndex: -1, reduction: "sum" }).div(this.#targets);
  }

  /** The global rank of the pipeline's last stage (this rank's dp and tp coordinates). */
  get #lastRank(): number {
    return this.#pp.ranks[this.#pp.size - 1];
  }

  /**
   * One step's forwards and backwards on the batch `x`, `y` (every rank of the pipeline passes
   * its dp rank's batch; the first stage reads `x`, the last `y`), the gradients then averaged
   * over the data-parallel ranks. Resolves to the whole batch's loss, on every rank.
   */
  async step(x: Tensor, y: Tensor): Promise<number> {
    this.#targets = y.numel();
    const losses: Tensor[] = [];
    const holdsLast = this.#stages.some((s) => s.isLast);
    const output = await this.#schedule.step(x, holdsLast ? { target: y, losses } : {});
    output?.dispose();
    const total = noGrad(() => losses.reduce((a, l) => a + l.item(), 0));
    for (const l of losses) l.dispose();
    if (this.#dp !== null) {
      const size = this.#dp.size;
      for (const p of this.module.parameters()) {
        if (p.grad === null) continue;
        await allReduce(p.grad, "sum", this.#dp);
        noGrad(() => p.grad!.div_(size));
      }
    }
    return await this.#fromLast(total);
  }

  /** `value` as the last stage has it, on every rank of the pipeline. */
  async #fromLast(value: number): Promise<number> {
    const t = tensor([value]);
    try {
      await broadcast(t, this.#lastRank, this.#pp);
      return t.toArray()[0];
    } finally {
      t.dispose();
    }
  }

  /**
   * The L2 norm of the whole model's gradients (every rank of the pipeline calls it): each
   * stage's parameters once, the tied embedding by the first stage only (`clipGradNormPipeline`,
   * measuring without scaling).
   */
  gradNorm(): number {
    return clipGradNormPipeline(this.#stages, Infinity);
  }

  /**
   * The loss of the batch `x`, `y` forward through the pipeline without gradients (evaluation):
   * stage by stage, activations sent point-to-point; resolves to its mean over the batch's
   * targets, on every rank of the pipeline.
   */
  async evalLoss(x: Tensor, y: Tensor): Promise<number> {
    const held = new Map(this.#stages.map((s) => [s.stageIndex, s]));
    const numStages = this.#stages[0].numStages, group = this.#pp;
    let value = 0;
    let activations: Tensor | null = null;
    for (let s = 0; s < numStages; s++) {
      const stage = held.get(s);
      if (stage === undefined) continue;
      const from = stage.rankOf(s - 1);
      let input = x;
      if (s > 0) {
        // On the batch's device, as the previous stage's output was sent from.
        input = zeros([x.shape[0], x.shape[1], this.#nEmbd], { device: x.device });
        await irecv(input, from, { group, tag: EVAL_TAG + s });
      }
      const out = noGrad(() => stage.submod.forward(input));
      if (input !== x) input.dispose();
      activations?.dispose();
      activations = null;
      if (stage.isLast) {
        this.#targets = y.numel();
        value = noGrad(() => {
          const loss = this.#loss(out, y);
          const v = loss.item();
          loss.dispose();
          return v;
        });
        out.dispose();
      } else {
        await isend(out, stage.rankOf(s + 1), { group, tag: EVAL_TAG + s + 1 });
        activations = out;
      }
    }
    activations?.dispose();
    return await this.#fromLast(value);
  }
}
