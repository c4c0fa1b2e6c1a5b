/**
 * Iteration-based training (`--dataset tokens`), as nanoGPT's train.py: random batches of a
 * token file, nanoGPT's learning-rate schedule, gradient accumulation, `estimate_loss` every
 * `evalInterval` iterations and a snapshot when the validation loss improves (or always, with
 * `alwaysSaveCheckpoint`), on one process or on every rank of a DDP or FSDP job.
 *
 * Two things differ from train.py, both for several ranks: every rank evaluates (a fully sharded
 * model's forward needs them all), scoring its share of the `evalIters` batches, and the sums over
 * the ranks make the means; and a resumed run reseeds from the seed, the rank and the iteration,
 * so its ranks draw different batches.
 * @module
 */

import { getRank, getWorldSize, isInitialized } from "../distributed/mod.ts";
import { warnStragglers } from "../distributed/stragglers.ts";
import { CheckpointError } from "../checkpoint/mod.ts";
import type { Module } from "../nn/module.ts";
import type { Optimizer } from "../optim/optimizer.ts";
import { DistributedDataParallel } from "../parallel/ddp.ts";
import { type FSDPModule, fsdpStateOf } from "../parallel/fsdp/fully_shard.ts";
import { noGrad } from "../tensor/autograd.ts";
import { manualSeed } from "../tensor/random.ts";
import { tidy, tidyAsync } from "../tensor/scope.ts";
import type { Device } from "../tensor/storage.ts";
import type { Tensor } from "../tensor/tensor.ts";
import { GPT } from "../nn/gpt.ts";
import { stopAgreed } from "../launch/stop_request.ts";
import { ConfigError, type TrainConfig } from "./_schema.ts";
import { processDevice } from "./devices.ts";
import { buildModel, buildOptimizer } from "./model.ts";
import { type Layout, shardedSnapshots, worldLayout } from "./_layout.ts";
import { parallelizeModel } from "./parallelize.ts";
import { openTokenData, type TokenData } from "./_tokens.ts";
import { getLr } from "./_nanogpt.ts";
import { type PeakFlops, peakFlops, peakFlopsFlag } from "./_peak_flops.ts";
import { sumOverRanks } from "./_stats.ts";
import { checkStep } from "./_finite.ts";
import { clipToNorm } from "./_clip.ts";
import { checkResumeAcrossRanks } from "./_resume.ts";
import { RunLog } from "./metrics.ts";
import { ddpPolicy, withAutocast } from "./precision.ts";
import { resumeSnapshot, type SnapshotPlace, writeSnapshot } from "./_snapshots.ts";
import { TimeSplit } from "./_time_split.ts";

/** What an iteration-based run reports. */
export interface IterResult {
  /** The iteration the run ended at (nanoGPT's `iter_num`), resumed ones included. */
  iterNum: number;
  /** Iterations trained by this call. */
  itersHere: number;
  /** The last logged training loss (NaN if none). */
  lastLoss: number;
  /** The last `estimate_loss`, or null when none ran. */
  losses: { train: number; val: number } | null;
  /** The best validation loss so far (nanoGPT's `best_val_loss`, 1e9 before any). */
  bestValLoss: number;
}

/** nanoGPT's starting `best_val_loss`. */
const NO_VAL_LOSS = 1e9;

/** Trains a GPT on a token file by iterations; in a DDP or FSDP job every rank runs one. */
export class IterTrainer {
  readonly rank: number;
  readonly worldSize: number;
  readonly data: TokenData;
  readonly model: Module;
  readonly device: Device;
  readonly optimizer: Optimizer<{ lr: number }>;
  /** The next iteration to run (nanoGPT's `iter_num`). */
  iterNum = 0;
  bestValLoss = NO_VAL_LOSS;
  /** Whether the launcher's request ended the run, with iterations left. */
  stoppedOnRequest = false;
  /** Where this process's time went; the job prints it at its end. */
  readonly times: TimeSplit = new TimeSplit();
  /** Micro-steps per iteration on this rank (nanoGPT divides them over the ranks). */
  readonly microSteps: number;
  readonly #fsdp: FSDPModule | null;
  /** The GPT, and its parameters counted before FSDP made them this rank's shards (for MFU). */
  readonly #gpt: GPT;
  readonly #params: number;
  #ddp: DistributedDataParallel | null = null;
  #runLog: RunLog | null = null;

  /**
   * Reads the data and builds the model (fully sharded under `--strategy fsdp`) and its optimizer;
   * call {@linkcode IterTrainer.init} before training.
   * @throws ConfigError naming the data, or a world size that does not divide the micro-steps.
   */
  constructor(
    readonly config: TrainConfig,
    readonly log: (line: string) => void = console.log,
    readonly layout: Layout = worldLayout(),
  ) {
    const distributed = isInitialized();
    this.rank = distributed ? getRank() : 0;
    this.worldSize = distributed ? getWorldSize() : 1;
    if (config.gradientAccumulationSteps % layout.dpSize !== 0) {
      throw new ConfigError(
        "gradientAccumulationSteps",
        `must be a multiple of the data-parallel size (${layout.dpSize}), got ` +
          `${config.gradientAccumulationSteps}`,
      );
    }
    this.microSteps = config.gradientAccumulationSteps / layout.dpSize;
    this.data = openTokenData(config.dataDir, config.blockSize);
    // Every rank builds the same model from the seed; each then draws its own batches.
    manualSeed(config.seed);
    this.device = processDevice(config.device);
    const whole = config.initFrom === "scratch" || config.initFrom === "resume"
      ? buildModel(config, { inputs: 1, outputs: this.data.meta.vocabSize })
      : pretrained(config, this.rank === 0 ? log : () => {});
    const gpt = whole as GPT;
    this.#gpt = gpt;
    this.#params = gpt.numParams();
    const model = whole.to(this.device);
    this.#fsdp = parallelizeModel(config, model, layout);
    this.model = model;
    this.optimizer = buildOptimizer(config, model);
    // Batches are drawn per dp rank: a TP group draws the same ones.
    manualSeed(config.seed + layout.dpRank);
  }

  /**
   * Resumes from the snapshot with `--init-from resume` (and in a worker the launcher restarted),
   * checks that every rank resumed the same, then wraps the model in DDP when distributed.
   * @throws CheckpointError for `resume` without a snapshot, or one that does not fit.
   */
  async init(): Promise<void> {
    const { config } = this;
    const restarted = Number(Deno.env.get("DTRAIN_RESTART_COUNT") ?? 0) > 0;
    let found = false, checksum = 0;
    if (config.initFrom === "resume" || restarted) {
      const info = resumeSnapshot(this.#place, this.model, this.optimizer, Infinity);
      if (info === null && !restarted) {
        throw new CheckpointError(config.snapshot, "--init-from resume: there is no snapshot");
      }
      if (info !== null) {
        found = true;
        checksum = info.checksum;
        this.iterNum = info.step ?? 0;
        this.bestValLoss = info.bestValLoss ?? NO_VAL_LOSS;
        // The snapshot's generator is rank 0's: each rank draws batches of its own again.
        manualSeed(config.seed + this.layout.dpRank + this.layout.dpSize * this.iterNum);
        if (this.rank === 0) this.log(`resuming from ${config.snapshot} at iter ${this.iterNum}`);
      }
    }
    if (this.worldSize > 1) {
      const of = this.#fsdp ? "snapshot" : "model";
      const loaded = { found, epochsRun: this.iterNum, checksum, of } as const;
      await checkResumeAcrossRanks(config.snapshot, this.worldSize, loaded);
      if (!this.#fsdp && this.layout.dpSize > 1) {
        const mixedPrecision = ddpPolicy(config);
        const processGroup = this.layout.dpGroup ?? undefined;
        this.#ddp = await DistributedDataParallel.create(this.model, {
          mixedPrecision,
          processGroup,
        });
      }
    }
    if (this.rank === 0) {
      const tokens = this.config.gradientAccumulationSteps * this.config.batchSize *
        this.config.blockSize;
      this.log(`tokens per iteration will be: ${tokens.toLocaleString("en-US")}`);
      this.log(`number of parameters: ${(this.#params / 1e6).toFixed(2)}M`);
      // What the iteration resumed at logs again is dropped from the record.
      this.#runLog = await RunLog.open(config, this.worldSize, found ? this.iterNum - 1 : null);
    }
  }

  /** This rank's batch of `split` (nanoGPT's `get_batch`), on the model's device. */
  getBatch(split: "train" | "val"): [Tensor, Tensor] {
    const { batchSize, blockSize } = this.config;
    return this.data[split].getBatch(batchSize, blockSize, { device: this.device });
  }

  /** The mean loss of a batch: nanoGPT's `logits, loss = model(X, Y)`. */
  #loss(x: Tensor, y: Tensor): Tensor {
    // Under autocast with --dtype bf16 (nanoGPT's `with ctx:`).
    return withAutocast(this.config, () => (this.model as GPT).forward(x, y).loss)();
  }

  /**
   * nanoGPT's `estimate_loss`: the mean loss over `evalIters` random batches of each split, in
   * evaluation mode. The data-parallel ranks share the batches (dp rank r scores batches r,
   * r + dpSize, ...), so that the job scores `evalIters` of each split, as nanoGPT's one process
   * does, in 1/dpSize of the time; the sums over the ranks make the means.
   */
  async estimateLoss(): Promise<{ train: number; val: number }> {
    const { evalIters } = this.config, { dpRank, dpSize } = this.layout;
    const mine = Math.max(0, Math.ceil((evalIters - dpRank) / dpSize));
    // Every rank runs as many forwards (one whose share is smaller scores a batch it does not
    // count): a sharded forward gathers parameters from every rank, and each strategy draws as
    // many batches, so that DDP and FSDP train on the same ones after it.
    const forwards = Math.ceil(evalIters / dpSize);
    this.model.eval();
    const sum = (split: "train" | "val") => {
      let total = 0;
      for (let k = 0; k < forwards; k++) {
        const loss = tidy(() => noGrad(() => this.#loss(...this.getBatch(split)).item()));
        if (k < mine) total += loss;
      }
      return total;
    };
    // A sharded model gathers its parameters once for all of the evaluation's forwards.
    const state = this.#fsdp && fsdpStateOf(this.#fsdp);
    const both = () => [sum("train"), sum("val")];
    const [train, val] = state ? await state.keepGathered(both) : both();
    this.model.train();
    // A TP group scores its dp rank's batches together: each of its ranks counts them, which
    // leaves the means as they are.
    const [t, v, n] = await sumOverRanks([train, val, mine], this.worldSize);
    return { train: t / n, val: v / n };
  }

  /**
   * One micro-step: forward, the loss divided by the accumulation steps, backward (gradients
   * synchronised over the ranks only when `sync`). Returns the divided loss.
   */
  async #microStep(x: Tensor, y: Tensor, sync: boolean): Promise<number> {
    const ddp = this.#ddp, fsdp = this.#fsdp;
    return await tidyAsync(async () => {
      const loss = this.#loss(x, y).div(this.config.gradientAccumulationSteps);
      if (fsdp) await (sync ? fsdp.backward(loss) : fsdp.noSync(() => fsdp.backward(loss)));
      else if (ddp) {
        // nanoGPT's `model.require_backward_grad_sync = (micro_step == gradient_accumulation_steps - 1)`
        ddp.requireBackwardGradSync = sync;
        await ddp.backward(loss);
      } else loss.backward();
      return loss.item();
    });
  }

  /** nanoGPT's training loop, from `iterNum` to `maxIters` (both included, as train.py). */
  async train(): Promise<IterResult> {
    const c = this.config, first = this.iterNum;
    let [x, y] = this.getBatch("train");
    // MFU's peak, known once the loop has settled (see below).
    let peak: PeakFlops | null = null;
    let t0 = performance.now(), localIter = 0, runningMfu = -1, lastLoss = NaN, rate = 0;
    let losses: IterResult["losses"] = null;
    const times = this.times;
    // Everything before the first iteration: the process, the data, the model, FSDP.
    times.add("start-up", performance.now());
    try {
      while (true) {
        const lr = c.decayLr ? getLr(this.iterNum, c) : c.lr;
        for (const group of this.optimizer.paramGroups) group.lr = lr;
        if (this.iterNum % c.evalInterval === 0) {
          const estimated = await times.measure("evaluation", () => this.estimateLoss());
          losses = estimated;
          await this.#evaluated(estimated, lr, rate);
        }
        if (this.iterNum === 0 && c.evalOnly) break;
        if (localIter === 5 && peak === null) {
          // When MFU is first logged (from the sixth iteration, as nanoGPT), every rank at once, so
          // each measures with the share of the cores it trains with; a shorter run never pays for
          // it. The measurement is kept out of the iteration's time.
          const start = performance.now();
          peak = peakFlops(c.device, this.device, c.dtype, peakFlopsFlag(c));
          const ms = performance.now() - start;
          times.add("start-up", ms);
          t0 += ms;
        }
        const iterStart = performance.now();
        let loss = 0;
        for (let micro = 0; micro < this.microSteps; micro++) {
          loss = await this.#microStep(x, y, micro === this.microSteps - 1);
          x.dispose();
          y.dispose();
          [x, y] = this.getBatch("train");
        }
        const lossf = loss * c.gradientAccumulationSteps;
        const norm = await checkStep(this.model, lossf, this.iterNum, this.worldSize);
        clipToNorm(this.model, c.gradClip, norm);
        this.optimizer.step();
        this.optimizer.zeroGrad();
        const t1 = performance.now(), dt = (t1 - t0) / 1000;
        t0 = t1;
        rate = c.batchSize * c.gradientAccumulationSteps / dt;
        if (this.iterNum % c.logInterval === 0) {
          await warnStragglers(c.stragglerMs, this.iterNum);
        }
        if (this.iterNum % c.logInterval === 0 && this.rank === 0) {
          lastLoss = lossf;
          if (peak !== null) { // from the sixth iteration: the loop has settled, as nanoGPT
            // The whole model's flops for this dp rank's batches, shared by its TP group.
            const fwdbwd = c.batchSize * this.microSteps;
            const mfu = this.#gpt.estimateMfu(fwdbwd, dt, this.#params, peak.flops) /
              this.layout.degrees.tp;
            runningMfu = runningMfu === -1 ? mfu : 0.9 * runningMfu + 0.1 * mfu;
          }
          this.log(
            `iter ${this.iterNum}: loss ${lossf.toFixed(4)}, time ${(dt * 1000).toFixed(2)}ms, ` +
              `mfu ${(runningMfu * 100).toFixed(2)}%${peak ? ` (of ${peak.label})` : ""}`,
          );
          await this.#runLog?.add({
            kind: "step",
            step: this.iterNum,
            epoch: 0,
            loss: lossf,
            lr,
            samplesPerSecond: rate,
            gradNorm: norm,
          });
        }
        const stop = await stopAgreed(this.worldSize);
        const iterMs = performance.now() - iterStart;
        times.add("iterations", iterMs);
        if (localIter === 0) times.firstIterationMs = iterMs;
        this.iterNum++;
        localIter++;
        if (this.iterNum > c.maxIters) break;
        if (stop) {
          this.stoppedOnRequest = true;
          await this.saveSnapshot();
          break;
        }
      }
    } finally {
      x.dispose();
      y.dispose();
    }
    // report.html, with every logged step: counted at the end, not left as an unnamed gap.
    await this.times.measure("end", () => this.#runLog?.writeReport());
    const { iterNum, bestValLoss } = this;
    return { iterNum, itersHere: iterNum - first, lastLoss, losses, bestValLoss };
  }

  /** Logs an evaluation and saves the snapshot when the validation loss improved. */
  async #evaluated(losses: { train: number; val: number }, lr: number, rate: number) {
    const { train, val } = losses;
    if (this.rank === 0) {
      this.log(`step ${this.iterNum}: train loss ${train.toFixed(4)}, val loss ${val.toFixed(4)}`);
      // The record is the evaluation's too (metrics.jsonl is appended and synced).
      await this.times.measure("evaluation", () =>
        this.#runLog?.add({
          kind: "eval",
          step: this.iterNum,
          epoch: 0,
          loss: train,
          trainLoss: train,
          validationLoss: val,
          lr,
          samplesPerSecond: rate,
        }));
    }
    if (val < this.bestValLoss || this.config.alwaysSaveCheckpoint) {
      this.bestValLoss = val;
      if (this.iterNum > 0) await this.saveSnapshot();
    }
  }

  /** Writes the snapshot (every rank calls it): the model, optimizer, iter_num, best_val_loss. */
  async saveSnapshot(): Promise<void> {
    if (this.rank === 0) this.log(`saving checkpoint to ${this.config.snapshot}`);
    await this.times.measure(
      "checkpoints",
      () =>
        writeSnapshot(this.#place, this.model, this.optimizer, {
          epochsRun: 0,
          step: this.iterNum,
          sampler: { epoch: 0, seed: this.config.seed },
          bestValLoss: this.bestValLoss,
        }),
    );
  }

  get #place(): SnapshotPlace {
    const path = this.config.snapshot, strategy = shardedSnapshots(this.config) ? "fsdp" : "ddp";
    const inBackground = this.config.asyncSnapshots;
    return { path, strategy, rank: this.rank, worldSize: this.worldSize, inBackground };
  }
}

/**
 * `--init-from DIR`: GPT-2 weights from a Hugging Face folder (GPT.fromPretrained, with the
 * configured dropout), its position table cropped to `--block-size` when that is shorter, as
 * nanoGPT's `init_from='gpt2*'`.
 */
function pretrained(config: TrainConfig, log: (line: string) => void): GPT {
  log(`Initializing from GPT-2 weights: ${config.initFrom}`);
  const model = GPT.fromPretrained(config.initFrom, { dropout: config.dropout });
  if (config.blockSize < model.config.blockSize) model.cropBlockSize(config.blockSize);
  return model;
}
