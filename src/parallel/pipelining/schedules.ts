/**
 * The schedules by name, as in PyTorch: `ScheduleGPipe` and `Schedule1F1B` run one stage per
 * rank, `ScheduleInterleaved1F1B` several (stage s on rank s mod ranks).
 * @module
 */

import { gpipeOrder, interleavedOrder, oneFOneBOrder } from "./orders.ts";
import { type PipelineLoss, PipelineSchedule, type PipelineScheduleOptions } from "./schedule.ts";
import type { PipelineStage } from "./stage.ts";
import type { PipelineOrder } from "./actions.ts";

/**
 * A schedule of one stage per rank (PyTorch's `PipelineScheduleSingle`), its order made by
 * `orderOf(numStages, nMicrobatches)`.
 */
export abstract class PipelineScheduleSingle extends PipelineSchedule {
  /**
   * Checks that the pipeline has one stage per rank and builds the order.
   *
   * @param name The schedule's name, for errors.
   * @param stage This rank's stage.
   * @param nMicrobatches Microbatches per step.
   * @param lossFn The loss of a microbatch.
   * @param orderOf Every rank's actions for a number of stages and microbatches.
   * @param options See {@linkcode PipelineScheduleOptions}.
   */
  protected constructor(
    name: string,
    stage: PipelineStage,
    nMicrobatches: number,
    lossFn: PipelineLoss,
    orderOf: (numStages: number, nMicrobatches: number) => PipelineOrder,
    options: PipelineScheduleOptions,
  ) {
    if (!(stage?.submod && typeof stage.stageIndex === "number")) {
      throw new TypeError(`${name}: expected a PipelineStage`);
    }
    if (stage.numStages !== stage.group.size) {
      throw new RangeError(
        `${name}: runs one stage per rank, but the pipeline has ${stage.numStages} stages on ` +
          `${stage.group.size} ranks (use ScheduleInterleaved1F1B for several stages per rank)`,
      );
    }
    const order = orderOf(stage.numStages, nMicrobatches);
    super(name, [stage], nMicrobatches, lossFn, order, options);
  }
}

/**
 * GPipe (PyTorch's `ScheduleGPipe`): every microbatch forward, then every microbatch backward.
 *
 * @example
 * ```ts
 * import assert from "node:assert/strict";
 * import { dist, F, nn, parallel, tensor } from "../../../mod.ts";
 * await dist.initProcessGroup({ initMethod: "tcp://127.0.0.1:0", rank: 0, worldSize: 1 });
 * const stage = new parallel.PipelineStage(new nn.Linear(2, 1), 0, 1);
 * const schedule = new parallel.ScheduleGPipe(stage, 2, (y, t) => F.mseLoss(y, t));
 * const losses: parallel.PipelineStepOptions["losses"] = [];
 * await schedule.step(tensor([1, 2, 3, 4], [2, 2]), { target: tensor([1, 0], [2, 1]), losses });
 * assert.equal(losses.length, 2);
 * await dist.destroyProcessGroup();
 * ```
 */
export class ScheduleGPipe extends PipelineScheduleSingle {
  /**
   * Creates a `ScheduleGPipe`.
   *
   * @param stage This rank's stage.
   * @param nMicrobatches Microbatches per step.
   * @param lossFn The loss of a microbatch, from the last stage's output and its target.
   * @param options See {@linkcode PipelineScheduleOptions}.
   */
  constructor(
    stage: PipelineStage,
    nMicrobatches: number,
    lossFn: PipelineLoss,
    options: PipelineScheduleOptions = {},
  ) {
    super("ScheduleGPipe", stage, nMicrobatches, lossFn, gpipeOrder, options);
  }
}

/**
 * 1F1B (PyTorch's `Schedule1F1B`): after a warm-up of forwards, each stage alternates one
 * backward and one forward, so at most numStages − stageIndex microbatches are in flight.
 */
export class Schedule1F1B extends PipelineScheduleSingle {
  /**
   * Creates a `Schedule1F1B`.
   *
   * @param stage This rank's stage.
   * @param nMicrobatches Microbatches per step, at least the number of stages.
   * @param lossFn The loss of a microbatch, from the last stage's output and its target.
   * @param options See {@linkcode PipelineScheduleOptions}.
   */
  constructor(
    stage: PipelineStage,
    nMicrobatches: number,
    lossFn: PipelineLoss,
    options: PipelineScheduleOptions = {},
  ) {
    super("Schedule1F1B", stage, nMicrobatches, lossFn, oneFOneBOrder, options);
  }
}

/**
 * Interleaved 1F1B (PyTorch's `ScheduleInterleaved1F1B`): each rank holds several stages
 * (rank r the stages r, r + ranks, ...), which shortens the bubble by the number of stages per
 * rank.
 */
export class ScheduleInterleaved1F1B extends PipelineSchedule {
  /**
   * Creates a `ScheduleInterleaved1F1B`.
   *
   * @param stages This rank's stages, every one the group places here.
   * @param nMicrobatches Microbatches per step, a multiple of max(1, ⌊nMicrobatches / ranks⌋).
   * @param lossFn The loss of a microbatch, from the last stage's output and its target.
   * @param options See {@linkcode PipelineScheduleOptions}.
   */
  constructor(
    stages: PipelineStage[],
    nMicrobatches: number,
    lossFn: PipelineLoss,
    options: PipelineScheduleOptions = {},
  ) {
    const name = "ScheduleInterleaved1F1B";
    if (!Array.isArray(stages) || stages.length === 0) {
      throw new TypeError(`${name}: expected this rank's PipelineStages in an array`);
    }
    const { numStages, group } = stages[0];
    const perRank = numStages / group.size;
    const held = stages.map((s) => s.stageIndex).sort((a, b) => a - b);
    const expected = Array.from({ length: perRank }, (_, i) => i * group.size + group.rank);
    if (`${held}` !== `${expected}`) {
      throw new RangeError(
        `${name}: group rank ${group.rank} of ${group.size} holds stages [${expected}] of ` +
          `${numStages}, got [${held}]`,
      );
    }
    const order = interleavedOrder(group.size, perRank, nMicrobatches);
    super(name, stages, nMicrobatches, lossFn, order, options);
  }
}
