/**
 * `PipelineStage`: one stage of a pipeline, the part of the model this rank runs, with what it
 * keeps between a microbatch's forward and its backward (PyTorch's `PipelineStage` for a model
 * split by hand, torchtitan's way).
 * @module
 */

import { worldGroup } from "../../distributed/init.ts";
import type { ProcessGroup } from "../../distributed/process_group.ts";
import { backwardAsync } from "../../tensor/autograd.ts";
import type { Tensor } from "../../tensor/tensor.ts";
import type { Module } from "../../nn/module.ts";
import { fsdpStateOf } from "../fsdp/fully_shard.ts";

/** Options of {@linkcode PipelineStage}. */
export interface PipelineStageOptions {
  /**
   * The pipeline's ranks (default: the world). Stage s runs on the group's rank
   * s mod group size, PyTorch's default ("loop") placement.
   */
  group?: ProcessGroup;
}

/** What a stage keeps of one microbatch from its forward to its backward. */
interface InFlight {
  /** The stage's input: tokens on the first stage, else a leaf that collects its gradient. */
  input: Tensor;
  /** The stage's output, with its autograd graph. */
  output: Tensor;
  /** The microbatch's loss, on the last stage. */
  loss: Tensor | null;
}

/**
 * One pipeline stage (PyTorch's `torch.distributed.pipelining.PipelineStage`): `module` is this
 * stage's part of the model (e.g. {@linkcode splitGPT}'s), run by a schedule on microbatches.
 *
 * @example A stage on a world of one process
 * ```ts
 * import assert from "node:assert/strict";
 * import { dist, nn, parallel } from "../../../mod.ts";
 * await dist.initProcessGroup({ initMethod: "tcp://127.0.0.1:0", rank: 0, worldSize: 1 });
 * const stage = new parallel.PipelineStage(new nn.Linear(4, 4), 0, 1);
 * assert.ok(stage.isFirst && stage.isLast);
 * await dist.destroyProcessGroup();
 * ```
 */
export class PipelineStage {
  /** This stage's module. */
  readonly submod: Module;
  /** This stage's index in the pipeline. */
  readonly stageIndex: number;
  /** The number of stages in the pipeline. */
  readonly numStages: number;
  /** The pipeline's process group. */
  readonly group: ProcessGroup;
  #inFlight = new Map<number, InFlight>();

  /**
   * Creates a `PipelineStage`.
   *
   * @param module This stage's part of the model.
   * @param stageIndex Its index, in [0, numStages).
   * @param numStages The stages of the whole pipeline.
   * @param options See {@linkcode PipelineStageOptions}.
   * @throws RangeError for an index out of range, or a stage that the placement puts on another
   *   rank of the group.
   */
  constructor(
    module: Module,
    stageIndex: number,
    numStages: number,
    options: PipelineStageOptions = {},
  ) {
    if (!Number.isInteger(numStages) || numStages < 1) {
      throw new RangeError(`PipelineStage: numStages must be a positive integer, got ${numStages}`);
    }
    if (!Number.isInteger(stageIndex) || stageIndex < 0 || stageIndex >= numStages) {
      throw new RangeError(
        `PipelineStage: stageIndex must be an integer in [0, ${numStages}), got ${stageIndex}`,
      );
    }
    const group = options.group ?? worldGroup("PipelineStage");
    if (group.rank < 0) {
      throw new RangeError(
        `PipelineStage: this process is not in the pipeline group (ranks ${group.ranks})`,
      );
    }
    if (numStages % group.size !== 0) {
      throw new RangeError(
        `PipelineStage: ${numStages} stages do not divide over the group's ${group.size} ranks`,
      );
    }
    if (stageIndex % group.size !== group.rank) {
      throw new RangeError(
        `PipelineStage: stage ${stageIndex} runs on group rank ${stageIndex % group.size} ` +
          `(stage mod ${group.size} ranks), not on this process's group rank ${group.rank}`,
      );
    }
    this.submod = module;
    this.stageIndex = stageIndex;
    this.numStages = numStages;
    this.group = group;
  }

  /** Whether this is the first stage (it reads the step's input). */
  get isFirst(): boolean {
    return this.stageIndex === 0;
  }

  /** Whether this is the last stage (it computes the loss). */
  get isLast(): boolean {
    return this.stageIndex === this.numStages - 1;
  }

  /** The global rank that runs stage `stage` of this pipeline. */
  rankOf(stage: number): number {
    return this.group.ranks[stage % this.group.size];
  }

  /**
   * Runs microbatch `mb` forward: `input` is the step's microbatch on the first stage, else the
   * activations received (made a leaf here, to collect their gradient). On the last stage,
   * `loss` maps the output to the microbatch's loss. Returns the output.
   * @ignore dtrain-internal (the schedules call it)
   */
  forwardOne(mb: number, input: Tensor, loss?: (output: Tensor) => Tensor): Tensor {
    if (this.#inFlight.has(mb)) {
      throw new Error(`PipelineStage ${this.stageIndex}: microbatch ${mb} ran forward twice`);
    }
    if (!this.isFirst) input.requiresGrad_();
    const output = this.submod.forward(input) as Tensor;
    this.#inFlight.set(mb, { input, output, loss: loss ? loss(output) : null });
    return output;
  }

  /**
   * The output of microbatch `mb` (between its forward and backward).
   * @ignore dtrain-internal
   */
  outputOf(mb: number): Tensor {
    const held = this.#inFlight.get(mb);
    if (held === undefined) {
      throw new Error(`PipelineStage ${this.stageIndex}: microbatch ${mb} has not run forward`);
    }
    return held.output;
  }

  /**
   * The loss of microbatch `mb` (last stage, between its forward and backward).
   * @ignore dtrain-internal
   */
  lossOf(mb: number): Tensor | null {
    return this.#inFlight.get(mb)?.loss ?? null;
  }

  /**
   * Runs microbatch `mb` backward from its loss (last stage) or from `gradOutput`, the gradient
   * of its output received from the next stage; gradients accumulate into the module's
   * parameters. Returns the gradient of the stage's input for the previous stage (null on the
   * first); the microbatch's activations are released.
   *
   * A module that `fullyShard` made the root of an FSDP tree runs its backward through FSDP
   * (PyTorch's stage does the same): inside `noSync` unless `lastOfStep`, so the full gradients
   * of the step's microbatches add up locally and are reduce-scattered once, by the last.
   * @ignore dtrain-internal (the schedules call it)
   */
  async backwardOne(
    mb: number,
    gradOutput: Tensor | null,
    lastOfStep = true,
  ): Promise<Tensor | null> {
    const held = this.#inFlight.get(mb);
    if (held === undefined) {
      throw new Error(
        `PipelineStage ${this.stageIndex}: backward of microbatch ${mb} before its forward`,
      );
    }
    this.#inFlight.delete(mb);
    const [root, gradient] = held.loss !== null
      ? [held.loss, undefined]
      : [held.output, gradOutput!];
    const fsdp = fsdpStateOf(this.submod);
    if (fsdp === undefined) await backwardAsync(root, gradient);
    else if (lastOfStep) await fsdp.backward(root, gradient);
    else await fsdp.noSync(() => fsdp.backward(root, gradient));
    held.output.dispose();
    if (this.isFirst) return null;
    const grad = held.input.grad;
    held.input.grad = null;
    held.input.dispose();
    if (grad === null) {
      // The previous stage would wait for a gradient that never comes.
      throw new Error(
        `PipelineStage ${this.stageIndex}: its output of microbatch ${mb} does not depend on ` +
          `its input, so no gradient goes back to stage ${this.stageIndex - 1}`,
      );
    }
    return grad;
  }

  /**
   * Forgets every microbatch in flight (a step that failed midway).
   * @ignore dtrain-internal
   */
  clear(): void {
    for (const held of this.#inFlight.values()) held.output.dispose();
    this.#inFlight.clear();
  }
}
