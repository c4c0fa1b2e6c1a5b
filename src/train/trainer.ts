/**
 * The training loop, after the original project's `Trainer`: run batches, run epochs, evaluate,
 * save snapshots, resume. It runs the same in one process and in every rank of a DDP or FSDP job;
 * only rank 0 prints. Under DDP rank 0 writes each snapshot file; under FSDP every rank writes its
 * shards of a sharded snapshot folder.
 * @module
 */

import type { DataLoader } from "../data/dataloader.ts";
import type { DistributedSampler } from "../data/distributed_sampler.ts";
import { getRank, getWorldSize, isInitialized } from "../distributed/mod.ts";
import { warnStragglers } from "../distributed/stragglers.ts";
import type { Module } from "../nn/module.ts";
import type { Optimizer } from "../optim/optimizer.ts";
import { DistributedDataParallel } from "../parallel/ddp.ts";
import type { FSDPModule } from "../parallel/fsdp/fully_shard.ts";
import { manualSeed } from "../tensor/random.ts";
import { tidyAsync } from "../tensor/scope.ts";
import { scheduleLr } from "./_lr.ts";
import type { Device } from "../tensor/storage.ts";
import type { Tensor } from "../tensor/tensor.ts";
import type { TrainConfig } from "./config.ts";
import { processDevice } from "./devices.ts";
import { ddpPolicy } from "./precision.ts";
import { buildModel, buildOptimizer, loadTask, type Task } from "./model.ts";
import { type Layout, shardedSnapshots, worldLayout } from "./_layout.ts";
import { parallelizeModel } from "./parallelize.ts";
import { sumOverRanks } from "./_stats.ts";
import { trainBatches } from "./_batches.ts";
import { checkStep } from "./_finite.ts";
import { clipToNorm } from "./_clip.ts";
import { checkResumeAcrossRanks } from "./_resume.ts";
import { RunLog } from "./metrics.ts";
import { nowUs, record, span } from "../profile/tracer.ts";
import { Progress } from "./progress.ts";
import { evaluate, formatScore } from "./_evaluate.ts";
import { PipelinedGPT } from "./_pipeline.ts";
import type { GPT } from "../nn/gpt.ts";
import { resumeSnapshot, type SnapshotPlace, writeSnapshot } from "./_snapshots.ts";
import { stopAgreed } from "../launch/stop_request.ts";
import type { EpochResult, TrainResult } from "./_results.ts";

export type { EpochResult, TrainResult };

/** Trains one model as configured; in a DDP or FSDP job every rank runs one Trainer. */
export class Trainer {
  readonly rank: number;
  readonly worldSize: number;
  readonly task: Task;
  readonly model: Module;
  /** Where the model and each batch live ("cpu", or the local rank's device: "cuda:LOCAL_RANK"). */
  readonly device: Device;
  readonly optimizer: Optimizer<{ lr: number }>;
  readonly sampler: DistributedSampler;
  readonly loader: DataLoader;
  epochsRun = 0;
  /** Optimizer steps over the whole run, resumed ones included (what --max-steps counts). */
  step = 0;
  /** Whether the launcher's request (launch/stop_request.ts) ended the run, with work left. */
  stoppedOnRequest = false;
  #ddp: DistributedDataParallel | null = null;
  /** The model, fully sharded (`--strategy fsdp`), or null. */
  readonly #fsdp: FSDPModule | null;
  /** This rank's pipeline stages (`--pp`), or null. */
  readonly #pipeline: PipelinedGPT | null;
  /** Rank 0's metrics.jsonl and report.html. */
  #runLog: RunLog | null = null;
  /** The last step's gradient norm (every step measures it, to stop a diverging run). */
  #gradNorm = NaN;
  /** The running epoch's progress line, cleared before a snapshot's line is printed. */
  #progress: Progress | null = null;
  /** Where in its epoch the snapshot this run resumed from stopped (0: at an epoch's end). */
  #resumePosition = 0;

  /**
   * Builds the model (fully sharded under `--strategy fsdp`), the optimizer over its parameters
   * (the shards under FSDP) and the data; call {@linkcode Trainer.init} before training.
   */
  constructor(
    readonly config: TrainConfig,
    readonly log: (line: string) => void = console.log,
    readonly layout: Layout = worldLayout(),
  ) {
    const distributed = isInitialized();
    this.rank = distributed ? getRank() : 0;
    this.worldSize = distributed ? getWorldSize() : 1;
    manualSeed(config.seed);
    this.task = loadTask(config);
    // One GPU per local rank (the launcher sets LOCAL_RANK); the model moves before its optimizer.
    this.device = processDevice(config.device);
    const model = buildModel(config, this.task).to(this.device);
    // --pp: this rank's stages of the whole GPT, as one module under the whole model's names.
    this.#pipeline = layout.ppGroup ? new PipelinedGPT(config, model as GPT, layout) : null;
    this.#fsdp = this.#pipeline ? null : parallelizeModel(config, model, layout);
    this.model = this.#pipeline?.module ?? model;
    this.optimizer = buildOptimizer(config, this.model);
    const batches = trainBatches(config, this.task, layout, this.device);
    this.sampler = batches.sampler;
    this.loader = batches.loader;
  }

  /**
   * Resumes from the snapshot if one exists, checks that every rank resumed from the same one, then
   * wraps the model in DDP when distributed (and not fully sharded).
   * @throws CheckpointError for a snapshot of the other strategy, or one that does not fit.
   * @throws Error on every rank, naming what each rank loaded, when they differ.
   */
  async init(): Promise<void> {
    const info = resumeSnapshot(this.#place, this.model, this.optimizer, this.task.train.length);
    const found = info !== null;
    if (found) {
      this.epochsRun = info.epochsRun;
      this.sampler.loadStateDict(info.sampler);
      this.#resumePosition = info.sampler.position ?? 0;
      // Snapshots from before steps were recorded: full epochs at this world size, plus the tail.
      this.step = info.step ?? this.epochsRun * this.loader.length +
          Math.ceil(this.#resumePosition / (this.config.batchSize * this.layout.dpSize));
      if (this.rank === 0) {
        const at = this.#resumePosition ? `, sample ${this.#resumePosition}` : "";
        this.log(
          `resuming from ${this.config.snapshot} at epoch ${this.epochsRun}${at} ` +
            `(world size ${this.worldSize})`,
        );
      }
    }
    if (this.worldSize > 1) {
      const checksum = info?.checksum ?? 0,
        of = this.#place.strategy === "fsdp" ? "snapshot" : "model";
      const loaded = { found, epochsRun: this.epochsRun, checksum, of } as const;
      await checkResumeAcrossRanks(this.config.snapshot, this.worldSize, loaded);
      // A pipeline averages its gradients over the dp group itself, once a step.
      if (!this.#fsdp && !this.#pipeline && this.layout.dpSize > 1) {
        const mixedPrecision = ddpPolicy(this.config);
        const processGroup = this.layout.dpGroup ?? undefined;
        this.#ddp = await DistributedDataParallel.create(this.model, {
          mixedPrecision,
          processGroup,
        });
      }
    }
    if (this.rank === 0) {
      this.#runLog = await RunLog.open(this.config, this.worldSize, found ? this.step : null);
    }
  }

  /**
   * One optimizer step on a batch; returns its loss.
   * @throws DivergedError on every rank, before the optimizer step, when a rank's loss or the
   *   gradient norm is not finite.
   */
  async runBatch(x: Tensor, y: Tensor): Promise<number> {
    const ddp = this.#ddp, fsdp = this.#fsdp, pipeline = this.#pipeline;
    return await tidyAsync(async () => {
      const [input, target] = [x.to(this.device), y.to(this.device)];
      let value: number, norm: number | undefined;
      if (pipeline) {
        value = await pipeline.step(input, target);
        norm = pipeline.gradNorm();
      } else {
        const loss = span("forward", "compute", () => this.task.loss(this.model, input, target));
        if (fsdp) await fsdp.backward(loss);
        else if (ddp) await ddp.backward(loss);
        else span("backward", "compute", () => loss.backward());
        value = loss.item();
      }
      const step = this.step + 1;
      this.#gradNorm = await checkStep(this.model, value, step, this.worldSize, norm);
      clipToNorm(this.model, this.config.gradClip, this.#gradNorm);
      scheduleLr(this.config, this.optimizer, this.step, this.loader.length);
      span("optimizer step", "optim", () => this.optimizer.step());
      this.optimizer.zeroGrad();
      return value;
    });
  }

  /**
   * One pass over this rank's share of the training data, from global sample `start` of the
   * epoch's order (see DistributedSampler.startAt), ending early at `--max-steps`. Every
   * `--log-every` steps it logs the loss over the ranks; with `saveEverySteps` it also snapshots
   * every that many steps, recording how far the epoch got.
   */
  async runEpoch(epoch: number, start = 0): Promise<EpochResult> {
    this.model.train();
    this.loader.setEpoch(epoch);
    if (start > 0) this.sampler.startAt(start);
    const full = this.loader.length;
    const left = this.config.maxSteps > 0 ? this.config.maxSteps - this.step : Infinity;
    const steps = Math.min(full, left);
    const logEvery = this.config.logEvery || Math.max(1, Math.round(full / 10));
    // Rank 0 prints to stdout, Progress's default; the other ranks stay quiet.
    const write = this.rank === 0 ? undefined : () => {};
    const progress = this.#progress = new Progress(epoch, this.config.epochs, steps, write);
    // Every step but an epoch's last consumes batchSize samples on each rank.
    const consumed = (n: number) => start + n * this.config.batchSize * this.layout.dpSize;
    let step = 0, lossSum = 0, interval = { loss: 0, steps: 0, samples: 0, t: performance.now() };
    let fetchUs = nowUs();
    for (const [x, y] of this.loader) {
      if (step >= steps) {
        x.dispose();
        y.dispose();
        break;
      }
      step++;
      // The step --max-steps stops at is logged too, so the record ends where the run did.
      const logged = step % logEvery === 0 || (step === steps && steps < full);
      record("data", "data", fetchUs, nowUs());
      const loss = await this.runBatch(x, y);
      this.step++;
      const samples = x.shape[0] * this.layout.dpSize;
      x.dispose();
      y.dispose();
      progress.update(samples);
      lossSum += loss;
      interval.loss += loss;
      interval.steps++;
      interval.samples += samples;
      if (logged) {
        const mean = await this.#meanOverRanks(interval.loss / interval.steps);
        const lr = this.optimizer.paramGroups[0].lr;
        progress.log(mean, lr);
        await warnStragglers(this.config.stragglerMs, this.step);
        await this.#runLog?.add({
          kind: "step",
          step: this.step,
          epoch: epoch + 1,
          loss: mean,
          lr,
          samplesPerSecond: interval.samples / ((performance.now() - interval.t) / 1000),
          gradNorm: this.#gradNorm,
        });
        interval = { loss: 0, steps: 0, samples: 0, t: performance.now() };
      }
      // A stop at the run's last step would only restart a finished job.
      const last = this.step === this.config.maxSteps ||
        (step === full && epoch + 1 === this.config.epochs);
      if (!last && await stopAgreed(this.worldSize)) {
        this.stoppedOnRequest = true;
        break;
      }
      const every = this.config.saveEverySteps;
      if (every > 0 && step % every === 0 && step < steps) await this.saveSnapshot(consumed(step));
      fetchUs = nowUs();
    }
    const loss = await this.#meanOverRanks(step ? lossSum / step : NaN);
    const score = await this.evaluate();
    const stopped = step < full
      ? ` (stopped by ${this.stoppedOnRequest ? "the launcher" : "--max-steps"})`
      : "";
    progress.finish(loss, formatScore(this.task, score) + stopped);
    const language = this.task.metric === "loss";
    const result = {
      loss,
      samplesPerSecond: progress.samplesPerSecond,
      score,
      steps: step,
      position: step < full ? consumed(step) : 0,
    };
    if (step < full) await this.#runLog?.writeReport();
    else {
      await this.#runLog?.add({
        kind: "epoch",
        step: this.step,
        epoch: epoch + 1,
        loss,
        lr: this.optimizer.paramGroups[0].lr,
        samplesPerSecond: result.samplesPerSecond,
        ...(language ? { validationLoss: score } : { testAccuracy: score }),
      });
    }
    return result;
  }

  /**
   * Scores the model on the whole held-out set (see `evaluate` in _evaluate.ts): the share of
   * correct classes, or a language model's mean loss per token; null without a held-out set.
   */
  evaluate(): Promise<number | null> {
    return evaluate({
      model: this.model,
      pipeline: this.#pipeline,
      task: this.task,
      layout: this.layout,
      device: this.device,
      sharded: this.config.strategy === "fsdp",
      worldSize: this.worldSize,
    });
  }

  /**
   * Trains the remaining epochs, writing snapshots on rank 0 every `saveEvery` and at the end; a
   * run that `--max-steps` stops in the middle of an epoch snapshots that position.
   */
  async train(): Promise<TrainResult> {
    let lastLoss = NaN, score: number | null = null, rate = 0, epochsHere = 0, stepsHere = 0;
    let stoppedByMaxSteps = false;
    const first = this.epochsRun;
    const { maxSteps } = this.config;
    for (let epoch = first; epoch < this.config.epochs; epoch++) {
      if (maxSteps > 0 && this.step >= maxSteps) {
        stoppedByMaxSteps = true;
        break;
      }
      const start = epoch === first ? this.#resumePosition : 0;
      const result = await this.runEpoch(epoch, start);
      lastLoss = result.loss;
      score = result.score;
      stepsHere += result.steps;
      if (result.position > 0) {
        stoppedByMaxSteps = !this.stoppedOnRequest;
        await this.saveSnapshot(result.position);
        break;
      }
      rate += result.samplesPerSecond;
      epochsHere++;
      this.epochsRun = epoch + 1;
      const stopping = (maxSteps > 0 && this.step >= maxSteps) || this.stoppedOnRequest;
      if (
        this.epochsRun % this.config.saveEvery === 0 || this.epochsRun === this.config.epochs ||
        stopping
      ) {
        await this.saveSnapshot();
      }
      if (this.stoppedOnRequest) break;
    }
    // Each epoch already scored the model; a run with nothing left to train scores the snapshot's.
    if (stepsHere === 0) score = await this.evaluate();
    const language = this.task.metric === "loss";
    return {
      epochsRun: this.epochsRun,
      epochsHere,
      lastLoss,
      testAccuracy: language ? null : score,
      validationLoss: language ? score : null,
      samplesPerSecond: epochsHere ? rate / epochsHere : 0,
      step: this.step,
      stepsHere,
      stoppedByMaxSteps,
    };
  }

  /**
   * Writes a snapshot atomically: under DDP rank 0 writes the file while the others wait, so that
   * no rank runs ahead of it; under FSDP every rank writes its shards and the save commits them.
   *
   * @param position Global samples of the current epoch consumed so far, 0 at an epoch's end.
   */
  async saveSnapshot(position = 0): Promise<void> {
    const { epoch, seed } = this.sampler.stateDict();
    const info = {
      epochsRun: this.epochsRun,
      step: this.step,
      sampler: position > 0 ? { epoch, seed, position } : { epoch, seed },
    };
    await writeSnapshot(this.#place, this.model, this.optimizer, info);
    if (this.rank === 0) {
      const at = position > 0 ? ` (epoch ${epoch + 1} at sample ${position})` : "";
      if (position > 0) this.#progress?.clear();
      this.log(`epoch ${this.epochsRun}${at}: snapshot saved to ${this.config.snapshot}`);
    }
  }

  get #place(): SnapshotPlace {
    const path = this.config.snapshot, strategy = shardedSnapshots(this.config) ? "fsdp" : "ddp";
    const inBackground = this.config.asyncSnapshots;
    return { path, strategy, rank: this.rank, worldSize: this.worldSize, inBackground };
  }

  async #meanOverRanks(value: number): Promise<number> {
    const [sum] = await sumOverRanks([value], this.worldSize);
    return sum / this.worldSize;
  }
}
