/**
 * Running a pipeline schedule: one rank's action list (orders.ts) executed on its stages in the
 * time steps every rank shares (_timeline.ts), the batch cut into microbatches, each step's
 * activations and gradients exchanged after its compute; then the gradients scaled as PyTorch
 * scales them and the tied parameters' gradients summed across stages.
 * @module
 */

import { agreeAcrossRanks } from "../../distributed/_agree.ts";
import { callerScope } from "../../distributed/ledger.ts";
import { diagnosePending } from "../../distributed/_pending_diagnosis.ts";
import { noGrad } from "../../tensor/autograd.ts";
import { cat } from "../../tensor/ops/indexing.ts";
import type { Tensor } from "../../tensor/tensor.ts";
import { span } from "../../profile/tracer.ts";
import {
  actionSpanName,
  actionString,
  type PipelineAction,
  type PipelineOrder,
} from "./actions.ts";
import { smallTensorDevice } from "../_verify.ts";
import { StageExchange } from "./_exchange.ts";
import { type PipelineTimeline, pipelineTimeline } from "./_timeline.ts";
import { splitMicrobatches } from "./_microbatch.ts";
import type { PipelineStage } from "./stage.ts";
import { syncTiedGradients } from "./_tied_sync.ts";

/** The loss of one microbatch from the last stage's output and the microbatch's target. */
export type PipelineLoss = (output: Tensor, target: Tensor) => Tensor;

/** What one step carries from action to action. */
interface StepState {
  /** The first stage's microbatches. */
  inputs: Tensor[];
  /** The last stage's targets, by microbatch. */
  targets: Tensor[];
  /** The last stage's outputs, by microbatch (detached). */
  outputs: Tensor[];
  /** The last stage's losses, by microbatch (detached). */
  losses: Tensor[];
  /** The step's messages between stages. */
  exchange: StageExchange;
  /** Backwards run so far, by stage (the last of a stage's reduces FSDP's gradients). */
  backwards: Map<number, number>;
}

/** Options of a schedule. */
export interface PipelineScheduleOptions {
  /**
   * Divide the gradients by `nMicrobatches` after the step (default true, PyTorch's
   * `scale_grads`): with a mean loss per microbatch the gradients are then the whole batch's.
   */
  scaleGrads?: boolean;
}

/** Options of {@linkcode PipelineSchedule.step}. */
export interface PipelineStepOptions {
  /** The whole batch's target, on the rank holding the last stage (cut like the input). */
  target?: Tensor;
  /** Receives each microbatch's loss (detached), in microbatch order, on the last stage. */
  losses?: Tensor[];
}

/**
 * What the schedules share (PyTorch's `_PipelineSchedule`): `step` runs this rank's part of the
 * pipeline order. Build one of {@linkcode ScheduleGPipe}, {@linkcode Schedule1F1B},
 * {@linkcode ScheduleInterleaved1F1B}.
 */
export abstract class PipelineSchedule {
  #stages: Map<number, PipelineStage>;
  #n: number;
  #lossFn: PipelineLoss;
  #order: PipelineOrder;
  #timeline: PipelineTimeline;
  #scale: boolean;
  #name: string;
  /** Whether the pipeline's ranks have compared their schedules (before the first step). */
  #agreed = false;

  /**
   * Checks the stages and keeps the order (the named schedules call it).
   *
   * @param name The schedule's name, for errors.
   * @param stages This rank's stages.
   * @param nMicrobatches Microbatches per step.
   * @param lossFn The loss of a microbatch.
   * @param order Every rank's actions.
   * @param options See {@linkcode PipelineScheduleOptions}.
   */
  protected constructor(
    name: string,
    stages: PipelineStage[],
    nMicrobatches: number,
    lossFn: PipelineLoss,
    order: PipelineOrder,
    options: PipelineScheduleOptions,
  ) {
    if (typeof lossFn !== "function") {
      throw new TypeError(`${name}: lossFn must be a function (output, target) => loss`);
    }
    const first = stages[0];
    for (const s of stages) {
      if (s.group !== first.group || s.numStages !== first.numStages) {
        throw new RangeError(
          `${name}: stages ${first.stageIndex} and ${s.stageIndex} belong to different pipelines`,
        );
      }
    }
    this.#name = name;
    this.#stages = new Map(stages.map((s) => [s.stageIndex, s]));
    this.#n = nMicrobatches;
    this.#lossFn = lossFn;
    this.#order = order;
    this.#timeline = pipelineTimeline(order, first.numStages);
    this.#scale = options.scaleGrads ?? true;
  }

  /** Every rank's actions in the order it runs them (PyTorch's `pipeline_order`). */
  get pipelineOrder(): PipelineOrder {
    return this.#order;
  }

  /**
   * Runs one step on the whole batch: this rank's forwards and backwards in the schedule's
   * order; gradients accumulate in the stages' parameters (call the optimizer afterwards).
   *
   * @param input The whole batch, on the rank holding stage 0 (ignored elsewhere, as in
   *   PyTorch: the other stages call `step()` without it).
   * @param options The target and the list for the losses, on the rank holding the last stage.
   * @returns On the rank holding the last stage, its outputs of every microbatch, concatenated
   *   along dimension 0 (detached); elsewhere null.
   * @throws Error naming the stage, rank and action that failed (a peer's death, a timeout).
   */
  step(input?: Tensor, options: PipelineStepOptions = {}): Promise<Tensor | null> {
    // Every message of the step is recorded in the ledger at the caller's line: one capture.
    return callerScope(() => this.#step(input, options));
  }

  async #step(input?: Tensor, options: PipelineStepOptions = {}): Promise<Tensor | null> {
    const first = this.#stages.get(0), any = [...this.#stages.values()][0];
    const last = this.#stages.get(any.numStages - 1);
    if (!this.#agreed) {
      await this.#agree(first ? input : last ? options.target : undefined);
      this.#agreed = true;
    }
    if (first && !input) throw new TypeError(`${this.#name}.step: stage 0 needs the input batch`);
    if (last && !options.target) {
      throw new TypeError(`${this.#name}.step: the last stage needs options.target for the loss`);
    }
    const inputs = first ? splitMicrobatches(input!, this.#n, `${this.#name}.step: input`) : [];
    const targets = last
      ? splitMicrobatches(options.target!, this.#n, `${this.#name}.step: target`)
      : [];
    const params = any.submod.parameters();
    const exchange = new StageExchange(
      this.#timeline,
      any.numStages,
      any.group,
      (stage, mb) => this.#stages.get(stage)!.outputOf(mb),
      { device: params[0]?.device ?? "cpu", headers: smallTensorDevice(any.group, params) },
    );
    const state: StepState = {
      inputs,
      targets,
      outputs: [],
      losses: [],
      exchange,
      backwards: new Map(),
    };
    // A failure names the action it stopped: the one computing, or the one a message was for.
    const failed = (action: PipelineAction) => async (err: unknown): Promise<never> => {
      // A blocking send or collective inside a stage (tensor parallelism) is diagnosed here.
      const explained = await exchange.explain(await diagnosePending(err));
      throw this.#failed(explained, action, any.rankOf(action.stage));
    };
    try {
      const mine = this.#timeline.actions[any.group.rank];
      for (const [step, action] of mine.entries()) {
        if (action !== null) await this.#run(action, state).catch(failed(action));
        const { waitsFor, posted } = exchange.communicate(step);
        if (waitsFor.length === 0) await posted;
        else {
          // A wait for headers is named for the action whose input they announce ("recv F3 s1").
          await span(`recv ${actionSpanName(waitsFor[0])}`, "wait", () => posted)
            .catch(failed(waitsFor[0]));
        }
      }
      await exchange.finish();
    } catch (err) {
      for (const s of this.#stages.values()) s.clear();
      exchange.abandon();
      throw err;
    }
    if (this.#scale) {
      // Each parameter once: one process's first and last stage share the tied embedding.
      const params = new Set([...this.#stages.values()].flatMap((s) => s.submod.parameters()));
      noGrad(() => {
        for (const p of params) p.grad?.div_(this.#n);
      });
    }
    await syncTiedGradients([...this.#stages.values()]).catch((err) => {
      const wrapped = new Error(
        `${this.#name}: summing the tied parameters' gradients across stages failed: ` +
          (err as Error).message,
        { cause: err },
      );
      throw Object.assign(wrapped, { code: (err as { code?: string }).code });
    });
    if (!last) return null;
    options.losses?.push(...state.losses);
    const merged = noGrad(() => cat(state.outputs, 0));
    for (const o of state.outputs) o.dispose();
    return merged;
  }

  /**
   * Compares this rank's schedule with the pipeline's other ranks (once, before the first step),
   * naming on every rank what differs: left alone, ranks that cut the batch into different
   * numbers of microbatches, or run another schedule, read as a loss's shape error, a tag
   * mismatch or a timeout several messages later. `batch` is the input on the first stage, the
   * target on the last: their rows are cut alike.
   */
  async #agree(batch: Tensor | undefined): Promise<void> {
    const any = [...this.#stages.values()][0], group = any.group;
    const rows = batch === undefined ? null : `${batch.ndim === 0 ? 0 : batch.shape[0]}`;
    await agreeAcrossRanks(group, this.#name, {
      schedule: this.#name,
      stages: `${any.numStages}`,
      microbatches: `${this.#n}`,
      "gradient scaling": this.#scale ? "on" : "off",
      "batch rows (the input's on the first stage, the target's on the last)": rows,
    }, {
      device: smallTensorDevice(group, any.submod.parameters()),
      fix: "every rank of the pipeline must build the same schedule over as many stages and " +
        "microbatches, and the first and last stage's batches must have as many rows",
    });
  }

  /**
   * One action: the wait for the input or gradient an earlier step is bringing ("recv F3 s1"),
   * then its compute, timed as the action ("F3 s1"), so that the trace shows the bubble as waits
   * between computes; what it sends goes in this step's batches.
   */
  async #run(a: PipelineAction, state: StepState): Promise<void> {
    const { inputs, targets, outputs, losses, exchange } = state;
    const stage = this.#stages.get(a.stage)!, mb = a.microbatch, name = actionSpanName(a);
    const receive = () => span(`recv ${name}`, "wait", () => exchange.take(a));
    if (a.type === "F") {
      const x = stage.isFirst ? inputs[mb] : await receive();
      const loss = stage.isLast ? (y: Tensor) => this.#lossFn(y, targets[mb]) : undefined;
      const y = span(name, "compute", () => stage.forwardOne(mb, x, loss));
      if (stage.isLast) {
        outputs[mb] = y.detach();
        losses[mb] = stage.lossOf(mb)!.detach();
      } else {
        exchange.give(a, y.detach());
      }
      return;
    }
    const gradOutput = stage.isLast ? null : await receive();
    const done = (state.backwards.get(a.stage) ?? 0) + 1;
    state.backwards.set(a.stage, done);
    const gradInput = await span(
      name,
      "compute",
      () => stage.backwardOne(mb, gradOutput, done === this.#n),
    );
    gradOutput?.dispose();
    if (gradInput) exchange.give(a, gradInput);
  }

  #failed(err: unknown, a: PipelineAction, rank: number): Error {
    const e = err as Error & { code?: string };
    const wrapped = new Error(
      `${this.#name}: stage ${a.stage} on rank ${rank} failed at ${actionString(a)}: ${e.message}`,
      { cause: err },
    );
    // The transport's code ("peer", "timeout", "mismatch") stays readable on the step's error.
    return Object.assign(wrapped, { code: e.code });
  }
}
