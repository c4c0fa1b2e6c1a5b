/**
 * The training loop, after the original project's `Trainer`: run batches, run epochs, evaluate,
 * save snapshots, resume. It runs the same in one process and in every rank of a DDP job; only
 * rank 0 prints and writes snapshots.
 * @module
 */

import { existsSync } from "node:fs";
import { removeStaleTemporaries } from "../checkpoint/mod.ts";
import { DataLoader } from "../data/dataloader.ts";
import { DistributedSampler } from "../data/distributed_sampler.ts";
import {
  allGather,
  allReduce,
  barrier,
  getRank,
  getWorldSize,
  isInitialized,
} from "../dist/mod.ts";
import type { Module } from "../nn/module.ts";
import { AdamW } from "../optim/adamw.ts";
import type { Optimizer } from "../optim/optimizer.ts";
import { SGD } from "../optim/sgd.ts";
import { DistributedDataParallel } from "../parallel/ddp.ts";
import { noGrad } from "../tensor/autograd.ts";
import { tensor, zeros } from "../tensor/creation.ts";
import { manualSeed } from "../tensor/random.ts";
import { tidy, tidyAsync } from "../tensor/scope.ts";
import type { Tensor } from "../tensor/tensor.ts";
import type { TrainConfig } from "./config.ts";
import { buildModel, loadTask, type Task } from "./model.ts";
import { nowUs, record, span } from "../profile/tracer.ts";
import { Progress } from "./progress.ts";
import { loadSnapshot, saveSnapshot } from "./snapshot.ts";

/** What a finished run reports. */
export interface TrainResult {
  /** Epochs completed, resumed ones included. */
  epochsRun: number;
  /** Epochs run by this call (0 when the snapshot had them all). */
  epochsHere: number;
  /** Mean training loss of the last epoch run (NaN if none ran). */
  lastLoss: number;
  /** Test accuracy of the final model (null without a test set). */
  testAccuracy: number | null;
  /** Training samples per second over the epochs run here, summed over ranks. */
  samplesPerSecond: number;
}

/** Trains one model as configured; in a DDP job every rank runs one Trainer. */
export class Trainer {
  readonly rank: number;
  readonly worldSize: number;
  readonly task: Task;
  readonly model: Module;
  readonly optimizer: Optimizer<{ lr: number }>;
  readonly sampler: DistributedSampler;
  readonly loader: DataLoader;
  epochsRun = 0;
  #ddp: DistributedDataParallel | null = null;
  /** Where in its epoch the snapshot this run resumed from stopped (0: at an epoch's end). */
  #resumePosition = 0;

  /** Builds the model, optimizer and data; call {@linkcode Trainer.init} before training. */
  constructor(readonly config: TrainConfig, readonly log: (line: string) => void = console.log) {
    const distributed = isInitialized();
    this.rank = distributed ? getRank() : 0;
    this.worldSize = distributed ? getWorldSize() : 1;
    manualSeed(config.seed);
    this.task = loadTask(config);
    this.model = buildModel(config, this.task);
    const params = this.model.parameters();
    this.optimizer = config.optimizer === "adamw"
      ? new AdamW(params, { lr: config.lr, weightDecay: config.weightDecay })
      : new SGD(params, {
        lr: config.lr,
        momentum: config.momentum,
        weightDecay: config.weightDecay,
      });
    this.sampler = new DistributedSampler(this.task.train, {
      numReplicas: this.worldSize,
      rank: this.rank,
      shuffle: true,
      seed: config.seed,
    });
    this.loader = new DataLoader(this.task.train, {
      batchSize: config.batchSize,
      sampler: this.sampler,
    });
  }

  /**
   * Resumes from the snapshot if one exists, checks that every rank resumed from the same one, then
   * wraps the model in DDP when distributed.
   * @throws Error on every rank, naming what each rank loaded, when they differ.
   */
  async init(): Promise<void> {
    // A job owns its snapshot path: what a killed predecessor left half-written goes.
    if (this.rank === 0) removeStaleTemporaries(this.config.snapshot);
    const found = existsSync(this.config.snapshot);
    if (found) {
      const info = loadSnapshot(this.config.snapshot, this.model, this.optimizer);
      this.epochsRun = info.epochsRun;
      this.sampler.loadStateDict(info.sampler);
      this.#resumePosition = info.sampler.position ?? 0;
      if (this.rank === 0) {
        const at = this.#resumePosition ? `, sample ${this.#resumePosition}` : "";
        this.log(
          `resuming from ${this.config.snapshot} at epoch ${this.epochsRun}${at} ` +
            `(world size ${this.worldSize})`,
        );
      }
    }
    if (this.worldSize > 1) {
      await this.#checkResumeAcrossRanks(found);
      this.#ddp = await DistributedDataParallel.create(this.model);
    }
  }

  /**
   * Ranks that resumed from different snapshots (a path on a disk of each node's own, say) would
   * run different epochs and hang or diverge: compare what each loaded before training.
   */
  async #checkResumeAcrossRanks(found: boolean): Promise<void> {
    const mine = tensor(
      Int32Array.from([found ? 1 : 0, this.epochsRun, found ? stateChecksum(this.model) : 0]),
    );
    const all = zeros([3 * this.worldSize], { dtype: "i32" });
    try {
      await allGather(all, mine);
      const values = all.toArray();
      const loaded = Array.from({ length: this.worldSize }, (_, r) => {
        const [had, epochs, checksum] = values.subarray(3 * r, 3 * r + 3);
        return had
          ? `epoch ${epochs} (model checksum ${(checksum >>> 0).toString(16).padStart(8, "0")})`
          : "no snapshot";
      });
      if (loaded.every((l) => l === loaded[0])) return;
      const ranksOf = new Map<string, number[]>();
      loaded.forEach((l, r) => ranksOf.set(l, [...(ranksOf.get(l) ?? []), r]));
      const seen = [...ranksOf].map(([l, ranks]) =>
        `rank${ranks.length > 1 ? "s" : ""} ${ranks.join(", ")}: ${l}`
      );
      throw new Error(
        `resume: the ranks did not load the same snapshot from ${this.config.snapshot} ` +
          `(${seen.join("; ")}); put --snapshot on a filesystem every node shares`,
      );
    } finally {
      mine.dispose();
      all.dispose();
    }
  }

  /** One optimizer step on a batch; returns its loss. */
  async runBatch(x: Tensor, y: Tensor): Promise<number> {
    const ddp = this.#ddp;
    return await tidyAsync(async () => {
      const loss = span("forward", "compute", () => this.task.loss(this.model.forward(x), y));
      if (ddp) await ddp.backward(loss);
      else span("backward", "compute", () => loss.backward());
      span("optimizer step", "optim", () => this.optimizer.step());
      this.optimizer.zeroGrad();
      return loss.item();
    });
  }

  /**
   * One pass over this rank's share of the training data, from global sample `start` of the
   * epoch's order (see DistributedSampler.startAt); returns mean loss and throughput. With
   * `saveEverySteps` it also snapshots every that many steps, recording how far the epoch got.
   */
  async runEpoch(
    epoch: number,
    start = 0,
  ): Promise<{ loss: number; samplesPerSecond: number; accuracy: number | null }> {
    this.model.train();
    this.loader.setEpoch(epoch);
    if (start > 0) this.sampler.startAt(start);
    const steps = this.config.maxSteps > 0
      ? Math.min(this.config.maxSteps, this.loader.length)
      : this.loader.length;
    // Rank 0 prints to stdout, Progress's default; the other ranks stay quiet.
    const write = this.rank === 0 ? undefined : () => {};
    const progress = new Progress(epoch, this.config.epochs, steps, write);
    let step = 0;
    let fetchUs = nowUs();
    for (const [x, y] of this.loader) {
      if (step++ >= steps) {
        x.dispose();
        y.dispose();
        break;
      }
      record("data", "data", fetchUs, nowUs());
      const loss = await this.runBatch(x, y);
      progress.update(loss, x.shape[0] * this.worldSize);
      x.dispose();
      y.dispose();
      // Every step but an epoch's last consumes batchSize samples on each rank.
      const every = this.config.saveEverySteps;
      if (every > 0 && step % every === 0 && step < steps) {
        await this.saveSnapshot(start + step * this.config.batchSize * this.worldSize);
      }
      fetchUs = nowUs();
    }
    const loss = await this.#meanOverRanks(progress.meanLoss);
    const accuracy = await this.evaluate();
    progress.finish(
      `mean loss ${loss.toFixed(4)}${
        accuracy === null ? "" : ` test accuracy ${(accuracy * 100).toFixed(2)}%`
      }`,
    );
    return { loss, samplesPerSecond: progress.samplesPerSecond, accuracy };
  }

  /** Test accuracy over the whole test set, each rank scoring its stride of it. */
  async evaluate(): Promise<number | null> {
    const test = this.task.test;
    if (test === null) return null;
    this.model.eval();
    let correct = 0, count = 0;
    const batch = 1000;
    for (let start = this.rank; start < test.length; start += batch * this.worldSize) {
      const indices = new Int32Array(
        Math.min(batch, Math.ceil((test.length - start) / this.worldSize)),
      );
      for (let i = 0; i < indices.length; i++) indices[i] = start + i * this.worldSize;
      correct += tidy(() =>
        noGrad(() => {
          const [x, y] = test.getBatch(indices);
          const predicted = this.model.forward(x).argmax(-1).toArray();
          const labels = y.toArray();
          let hits = 0;
          for (let i = 0; i < labels.length; i++) if (predicted[i] === labels[i]) hits++;
          return hits;
        })
      );
      count += indices.length;
    }
    this.model.train();
    const [totalCorrect, total] = await this.#sumOverRanks([correct, count]);
    return totalCorrect / total;
  }

  /** Trains the remaining epochs, writing snapshots on rank 0 every `saveEvery` and at the end. */
  async train(): Promise<TrainResult> {
    let lastLoss = NaN, accuracy: number | null = null, rate = 0, epochsHere = 0;
    const first = this.epochsRun;
    for (let epoch = first; epoch < this.config.epochs; epoch++) {
      const start = epoch === first ? this.#resumePosition : 0;
      const { loss, samplesPerSecond, accuracy: epochAccuracy } = await this.runEpoch(epoch, start);
      lastLoss = loss;
      accuracy = epochAccuracy;
      rate += samplesPerSecond;
      epochsHere++;
      this.epochsRun = epoch + 1;
      if (this.epochsRun % this.config.saveEvery === 0 || this.epochsRun === this.config.epochs) {
        await this.saveSnapshot();
      }
    }
    // Each epoch already scored the model; a run with nothing left to train scores the snapshot's.
    if (epochsHere === 0) accuracy = await this.evaluate();
    return {
      epochsRun: this.epochsRun,
      epochsHere,
      lastLoss,
      testAccuracy: accuracy,
      samplesPerSecond: epochsHere ? rate / epochsHere : 0,
    };
  }

  /**
   * Rank 0 writes the snapshot atomically; the others wait so that no rank runs ahead of it.
   *
   * @param position Global samples of the current epoch consumed so far, 0 at an epoch's end.
   */
  async saveSnapshot(position = 0): Promise<void> {
    if (this.rank === 0) {
      const { epoch, seed } = this.sampler.stateDict();
      saveSnapshot(this.config.snapshot, this.model, this.optimizer, {
        epochsRun: this.epochsRun,
        sampler: position > 0 ? { epoch, seed, position } : { epoch, seed },
      });
      const at = position > 0 ? ` (epoch ${epoch + 1} at sample ${position})` : "";
      this.log(`epoch ${this.epochsRun}${at}: snapshot saved to ${this.config.snapshot}`);
    }
    if (this.worldSize > 1) await barrier();
  }

  async #meanOverRanks(value: number): Promise<number> {
    const [sum] = await this.#sumOverRanks([value]);
    return sum / this.worldSize;
  }

  async #sumOverRanks(values: number[]): Promise<number[]> {
    if (this.worldSize === 1) return values;
    const t = tensor(values);
    try {
      await allReduce(t, "sum");
      return Array.from(t.toArray());
    } finally {
      t.dispose();
    }
  }
}

/** FNV-1a over the bits of every tensor in `model`'s state dict: equal models, equal sums. */
function stateChecksum(model: Module): number {
  let hash = 0x811c9dc5;
  for (const t of Object.values(model.stateDict())) {
    const values = t.toArray();
    const bits = new Uint32Array(values.buffer, values.byteOffset, values.length);
    for (let i = 0; i < bits.length; i++) hash = Math.imul(hash ^ bits[i], 0x01000193);
  }
  return hash | 0;
}
